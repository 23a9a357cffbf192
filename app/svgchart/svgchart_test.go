package svgchart

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var textPattern = regexp.MustCompile(`<text x="(\d+)" y="(\d+)" style="[^"]*font-size:(\d+)px[^"]*">([^<]*)</text>`)

// TestBarLabelsDoNotOverlap: the value axis of the lab's bar charts once
// read "20.00k22.50k" at its end (the library's last label pulled in over
// the one before). Labels on one line must leave room for each other.
func TestBarLabelsDoNotOverlap(t *testing.T) {
	for _, bars := range [][]Bar{
		{{"sync", 2300}, {"memory", 21000}, {"list", 19000}, {"list-reliable", 17000}, {"pubsub", 20500}, {"stream", 19900}, {"streamgroup", 22400}},
		{{"a", 7}, {"b", 9.5}},
		{{"memory", 118_000}, {"streamgroup", 31_000}},
	} {
		svg, err := Bars("title", bars, 800, 60+34*len(bars))
		if err != nil {
			t.Fatal(err)
		}
		lines := map[int][][2]int{} // y → [x, width] of each label on it
		for _, m := range textPattern.FindAllStringSubmatch(string(svg), -1) {
			x, _ := strconv.Atoi(m[1])
			y, _ := strconv.Atoi(m[2])
			size, _ := strconv.Atoi(m[3])
			// A generous width: 0.6 em per character.
			lines[y] = append(lines[y], [2]int{x, len([]rune(m[4])) * size * 6 / 10})
		}
		for y, labels := range lines {
			slices.SortFunc(labels, func(a, b [2]int) int { return a[0] - b[0] })
			for i := 1; i < len(labels); i++ {
				if labels[i-1][0]+labels[i-1][1] > labels[i][0] {
					t.Errorf("bars %v: labels at y=%d overlap: %v", bars, y, labels)
					break
				}
			}
		}
	}
}

// TestLineAxesLabelDistinctValues: the dashboard's lines once repeated
// their value labels on a quiet or flat series and crowded their time
// labels. Every label of an axis differs from the others, whatever the
// series.
func TestLineAxesLabelDistinctValues(t *testing.T) {
	times := make([]string, 300)
	for i := range times {
		times[i] = fmt.Sprintf("12:%02d:%02d", i/60, i%60)
	}
	for _, values := range [][]float64{make([]float64, 300), ramp(300, 0.1), ramp(300, 2), ramp(300, 24000)} {
		svg, err := Lines("title", times, []Series{{Name: "ok", Values: values}}, 640, 280)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		var timeLabels int
		for _, m := range textPattern.FindAllStringSubmatch(string(svg), -1) {
			if strings.HasPrefix(m[4], "12:") {
				timeLabels++
				continue
			}
			seen[m[4]]++
		}
		for label, n := range seen {
			if n > 1 && label != "title" && label != "ok" {
				t.Errorf("series up to %v: the label %q appears %d times: %v", values[len(values)-1], label, n, seen)
			}
		}
		if timeLabels < 2 || timeLabels > 7 {
			t.Errorf("series up to %v: %d time labels, want a few (at most 7)", values[len(values)-1], timeLabels)
		}
	}
}

// ramp is n values rising from 0 to top.
func ramp(n int, top float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = top * float64(i) / float64(n-1)
	}
	return out
}
