package streamid

import (
	"testing"
	"time"
)

func TestLessIsNumericAndPlusIsTop(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"9-0", "10-0", true}, {"10-0", "9-0", false}, {"5-2", "5-10", true}, {"5-1", "5-1", false},
		{"1-0", "+", true}, {"+", "1-0", false}, {"+", "+", false},
	} {
		if got := Less(c.a, c.b); got != c.want {
			t.Errorf("Less(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestTimeAndAt(t *testing.T) {
	at := time.UnixMilli(1795941009284)
	if id := At(at); id != "1795941009284-0" || !Time(id).Equal(at) {
		t.Fatalf("At %s, Time %v", id, Time(id))
	}
}
