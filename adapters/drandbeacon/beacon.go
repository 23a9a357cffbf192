// Package drandbeacon reads a public randomness beacon's round over
// drand's HTTP API (room.BeaconReader): GET <chain base>/public/<round>
// answers {"round", "randomness", "signature"}, the randomness being the
// SHA-256 of the signature.
//
// It checks that the answer is the round asked for and that its
// randomness is the hash of its signature, not the signature itself
// against the chain's public key (a BLS pairing, which would bring in
// drand's cryptography library): a checker of the published draw reads
// the same round from the beacon, or any of its mirrors, and compares.
package drandbeacon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/room"
)

// maxAnswer bounds a round's answer (drand's is under 1 KiB).
const maxAnswer = 64 << 10

// Reader reads rounds over HTTP.
type Reader struct{ client *http.Client }

// New reads rounds with a client that follows no redirect (a beacon's URL
// was fixed at the room's creation: it is read where it was named) and
// gives up after timeout.
func New(timeout time.Duration) *Reader {
	return &Reader{client: &http.Client{Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// round is drand's answer for one round.
type round struct {
	Round      uint64 `json:"round"`
	Randomness string `json:"randomness"`
	Signature  string `json:"signature"`
}

// Randomness implements room.BeaconReader.
func (r *Reader) Randomness(ctx context.Context, b core.RoomBeacon) ([]byte, error) {
	url := strings.TrimRight(b.URL, "/") + "/public/" + strconv.FormatUint(b.Round, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("drandbeacon: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("drandbeacon: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("drandbeacon: read round %d: %w", b.Round, err)
	}
	if resp.StatusCode != http.StatusOK {
		// 404 or 425 while the round is not out yet
		return nil, fmt.Errorf("drandbeacon: round %d: %s", b.Round, resp.Status)
	}
	return check(body, b.Round)
}

// check reads a round's answer: the round asked for, with a randomness
// of 32 bytes that is the SHA-256 of its signature.
func check(body []byte, want uint64) ([]byte, error) {
	var got round
	if err := json.Unmarshal(body, &got); err != nil {
		return nil, fmt.Errorf("drandbeacon: round %d: not a round's answer: %w", want, err)
	}
	randomness, rerr := hex.DecodeString(got.Randomness)
	signature, serr := hex.DecodeString(got.Signature)
	switch {
	case got.Round != want:
		return nil, fmt.Errorf("drandbeacon: asked for round %d, got %d", want, got.Round)
	case rerr != nil || serr != nil || len(randomness) != sha256.Size || len(signature) == 0:
		return nil, fmt.Errorf("drandbeacon: round %d: randomness or signature not hex of the expected size", want)
	}
	if sum := sha256.Sum256(signature); !bytes.Equal(sum[:], randomness) {
		return nil, errors.New("drandbeacon: round " + strconv.FormatUint(want, 10) + ": the randomness is not the signature's SHA-256")
	}
	return randomness, nil
}

var _ room.BeaconReader = (*Reader)(nil)
