// Package svgchart draws the project's charts as standalone SVG with
// github.com/go-analyze/charts: the dashboard's live lines and the bars of
// the comparison lab's results. One look for both, drawn on the server, so
// the pages load no chart script and the docs need no image tool.
package svgchart

import (
	"github.com/go-analyze/charts"
)

// Series is one named line.
type Series struct {
	Name   string
	Values []float64
}

// Lines draws series over the labels of their points.
func Lines(title string, labels []string, series []Series, width, height int) ([]byte, error) {
	values := make([][]float64, len(series))
	names := make([]string, len(series))
	top := 0.0
	for i, s := range series {
		values[i], names[i] = s.Values, s.Name
		for _, v := range s.Values {
			top = max(top, v)
		}
	}
	// Six times along the bottom, not one per point crowding each other;
	// values from 0, to at least 1, as short as they can be: with the
	// library's defaults a quiet series (0 to 2 orders a second) read
	// "0.00 0.50 1.00" and a flat one repeated its one label.
	timeAxis := charts.XAxisOption{Labels: labels, LabelCount: min(6, len(labels))}
	valueAxis := charts.YAxisOption{Min: charts.Ptr(0.0),
		ValueFormatter: func(v float64) string { return charts.FormatValueHumanize(v, 2, false) }}
	if top < 1 {
		valueAxis.Max, valueAxis.LabelCount = charts.Ptr(1.0), 5
	}
	p, err := charts.LineRender(values, charts.SVGOutputOptionFunc(), charts.TitleTextOptionFunc(title),
		charts.XAxisOptionFunc(timeAxis), charts.YAxisOptionFunc(valueAxis), charts.LegendLabelsOptionFunc(names),
		charts.DimensionsOptionFunc(width, height))
	if err != nil {
		return nil, err
	}
	return p.Bytes()
}

// Bar is one labelled value.
type Bar struct {
	Label string
	Value float64
}

// Bars draws horizontal bars, the first on top.
func Bars(title string, bars []Bar, width, height int) ([]byte, error) {
	values := make([]float64, len(bars))
	labels := make([]string, len(bars))
	// The library draws the first category at the bottom.
	for i, b := range bars {
		values[len(bars)-1-i], labels[len(bars)-1-i] = b.Value, b.Label
	}
	// The value axis: few labels, as short as they can be ("24k", not
	// "24.00k"); with the library's defaults the last two overlapped.
	valueAxis := charts.XAxisOption{LabelCount: 5, ValueFormatter: func(v float64) string { return charts.FormatValueHumanize(v, 0, false) }}
	p, err := charts.HorizontalBarRender([][]float64{values}, charts.SVGOutputOptionFunc(), charts.TitleTextOptionFunc(title),
		charts.YAxisLabelsOptionFunc(labels), charts.XAxisOptionFunc(valueAxis), charts.DimensionsOptionFunc(width, height))
	if err != nil {
		return nil, err
	}
	return p.Bytes()
}
