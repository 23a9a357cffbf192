package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// TestABadBodySaysWhatIsWrongInTheClientsTerms: the message names the
// field and the kind of value it wants, never a Go type or struct.
func TestABadBodySaysWhatIsWrongInTheClientsTerms(t *testing.T) {
	type notice struct {
		Amount int64     `json:"amount"`
		Status string    `json:"status"`
		When   time.Time `json:"when"`
		Tags   []string  `json:"tags"`
	}
	for body, want := range map[string]string{
		`{"amount":"12"}`:      `field "amount": want an integer, not string`,
		`{"amount":1.5}`:       `field "amount": want an integer, not number`,
		`{"status":7}`:         `field "status": want a string, not number`,
		`{"tags":"a"}`:         `field "tags": want an array, not string`,
		`{"when":"yesterday"}`: `a time is not RFC 3339`,
		`{"bogus":1}`:          `unknown field "bogus"`,
		`{"amount":`:           `the JSON ends too soon`,
		`{"amount" 1}`:         `not valid JSON (at byte 11)`,
		``:                     `the body is empty`,
		`[1]`:                  `want an object, not array`,
	} {
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		dec.DisallowUnknownFields()
		var n notice
		err := &core.Error{Code: core.CodeBadRequest, Op: core.OpDecodeJSON, Message: "invalid JSON body", Err: dec.Decode(&n)}
		msg := clientMessage(core.Wrap("an outer step", core.CodeUnavailable, err))
		if core.CodeOf(err) != core.CodeBadRequest || !strings.Contains(msg, want) {
			t.Errorf("%s: %q (%s), want bad_request saying %q", body, msg, core.CodeOf(err), want)
		}
		for _, leak := range []string{"Go ", "struct", "int64", "json:", "notice", "time.Time", "[]string"} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: %q names %q", body, msg, leak)
			}
		}
	}
}
