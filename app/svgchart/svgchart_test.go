package svgchart

import (
	"regexp"
	"slices"
	"strconv"
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
