package drandbeacon_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/drandbeacon"
	"github.com/seckill-lab/seckill/core"
)

// stubChain answers drand's /public/<round> as a chain would, and a few
// rounds wrongly.
func stubChain(t *testing.T) *httptest.Server {
	t.Helper()
	sig := bytes.Repeat([]byte{0xab}, 48)
	sum := sha256.Sum256(sig)
	good := func(round int) string {
		return fmt.Sprintf(`{"round":%d,"randomness":"%x","signature":"%x"}`, round, sum, sig)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chain/public/7":
			fmt.Fprint(w, good(7))
		case "/chain/public/8": // another round's answer
			fmt.Fprint(w, good(7))
		case "/chain/public/9": // randomness not the signature's hash
			fmt.Fprintf(w, `{"round":9,"randomness":"%064x","signature":"%x"}`, 1, sig)
		case "/chain/public/10":
			http.Redirect(w, r, "/chain/public/7", http.StatusFound)
		case "/chain/public/11":
			fmt.Fprint(w, strings.Repeat(" ", 70<<10)+good(11))
		default:
			http.Error(w, "not yet", http.StatusTooEarly)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestARoundIsReadOnlyAsTheChainPublishedIt: the round asked for, with a
// randomness that is its signature's SHA-256; another round's answer, a
// forged randomness, a redirect, a round not out yet and an oversized
// answer are refused.
func TestARoundIsReadOnlyAsTheChainPublishedIt(t *testing.T) {
	srv := stubChain(t)
	r := drandbeacon.New(2 * time.Second)
	ctx := context.Background()
	got, err := r.Randomness(ctx, core.RoomBeacon{URL: srv.URL + "/chain/", Round: 7})
	sum := sha256.Sum256(bytes.Repeat([]byte{0xab}, 48))
	if err != nil || hex.EncodeToString(got) != hex.EncodeToString(sum[:]) {
		t.Fatalf("round 7: %x, %v", got, err)
	}
	for round, why := range map[uint64]string{8: "another round's answer", 9: "a randomness not the signature's hash",
		10: "a redirect", 12: "a round not out yet", 11: "an answer past 64 KiB"} {
		if got, err := r.Randomness(ctx, core.RoomBeacon{URL: srv.URL + "/chain", Round: round}); err == nil {
			t.Errorf("%s was read: %x", why, got)
		}
	}
}
