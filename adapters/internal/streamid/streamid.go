// Package streamid compares and dates Redis stream entry ids ("ms-seq").
package streamid

import (
	"strconv"
	"strings"
	"time"
)

// Less orders ids numerically (as strings, "10-0" would sort before
// "9-0"); "+" stands above every id.
func Less(a, b string) bool {
	if a == "+" || b == "+" {
		return b == "+" && a != "+"
	}
	am, as := split(a)
	bm, bs := split(b)
	if am != bm {
		return am < bm
	}
	return as < bs
}

// Time is when the entry was added, from the id's milliseconds.
func Time(id string) time.Time {
	ms, _ := split(id)
	return time.UnixMilli(int64(ms))
}

// At is the least id an entry added at t can have: a MINID bound that
// keeps everything from t on.
func At(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) + "-0" }

func split(id string) (uint64, uint64) {
	ms, seq, _ := strings.Cut(id, "-")
	m, _ := strconv.ParseUint(ms, 10, 64)
	s, _ := strconv.ParseUint(seq, 10, 64)
	return m, s
}
