package codewebhook_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/codewebhook"
	"github.com/seckill-lab/seckill/core"
)

var secret = []byte("gateway-shared-secret-for-tests")

// gateway plays an SMS gateway: it checks each request's signature the way
// a gateway would, and answers with the statuses it is given, in order
// (the last one repeats).
type gateway struct {
	statuses []int
	calls    atomic.Int32
	received chan map[string]any
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(g.calls.Add(1)) - 1
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "not json", http.StatusUnsupportedMediaType)
		return
	}
	want := codewebhook.Sign(secret, body)
	if !hmac.Equal([]byte(r.Header.Get(codewebhook.SignatureHeader)), []byte(want)) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	status := g.statuses[min(n, len(g.statuses)-1)]
	if status == http.StatusOK {
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		g.received <- m
	}
	w.WriteHeader(status)
}

func newGateway(t *testing.T, statuses ...int) (*gateway, string) {
	g := &gateway{statuses: statuses, received: make(chan map[string]any, 10)}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv.URL
}

var code = core.LoginCode{Phone: "+8613811112222", Code: "042917", ExpiresAt: time.Date(2026, 12, 1, 18, 5, 0, 0, time.UTC)}

func TestTheGatewayGetsASignedCode(t *testing.T) {
	g, url := newGateway(t, http.StatusOK)
	s, err := codewebhook.New(codewebhook.Config{URL: url, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), code); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := <-g.received
	want := map[string]any{"phone": "+8613811112222", "code": "042917", "expiresAt": "2026-12-01T18:05:00Z"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the gateway got %s=%v, want %v (body %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the gateway got fields %v, want exactly phone, code, expiresAt", got)
	}
}

func TestAWrongSecretIsRefusedByTheGateway(t *testing.T) {
	g, url := newGateway(t, http.StatusOK)
	s, _ := codewebhook.New(codewebhook.Config{URL: url, Secret: []byte("another-secret-entirely"), Attempts: 3, RetryInitial: time.Millisecond})
	if err := s.Send(context.Background(), code); err == nil {
		t.Fatal("a code signed with the wrong secret was reported delivered")
	}
	if n := g.calls.Load(); n != 1 {
		t.Errorf("a refusal (401) was tried %d times, want once: it is final", n)
	}
}

func TestFailuresAreRetriedWithBackoff(t *testing.T) {
	g, url := newGateway(t, http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusOK)
	s, _ := codewebhook.New(codewebhook.Config{URL: url, Secret: secret, Attempts: 3, RetryInitial: time.Millisecond})
	if err := s.Send(context.Background(), code); err != nil {
		t.Fatalf("Send after two failures and a success: %v", err)
	}
	if n := g.calls.Load(); n != 3 {
		t.Errorf("the gateway was called %d times, want 3", n)
	}
}

func TestAGatewayThatKeepsFailingIsAnError(t *testing.T) {
	g, url := newGateway(t, http.StatusBadGateway)
	s, _ := codewebhook.New(codewebhook.Config{URL: url, Secret: secret, Attempts: 4, RetryInitial: time.Millisecond})
	err := s.Send(context.Background(), code)
	if err == nil || !strings.Contains(err.Error(), "502") {
		t.Fatalf("Send = %v, want the gateway's 502", err)
	}
	if n := g.calls.Load(); n != 4 {
		t.Errorf("the gateway was called %d times, want Attempts=4", n)
	}
}

func TestTheCallersDeadlineBoundsTheRetries(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	s, _ := codewebhook.New(codewebhook.Config{URL: srv.URL, Secret: secret, Attempts: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.Send(ctx, code); err == nil {
		t.Fatal("a gateway that never answers was reported delivered")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Send took %v past a 300ms deadline", d)
	}
}

func TestConfigIsValidated(t *testing.T) {
	for _, c := range []codewebhook.Config{
		{URL: "", Secret: secret},
		{URL: "ftp://gateway/", Secret: secret},
		{URL: "/relative", Secret: secret},
		{URL: "https://gateway.example/sms", Secret: nil},
	} {
		if _, err := codewebhook.New(c); err == nil {
			t.Errorf("New(%+v) accepted a bad config", c)
		}
	}
}

// TestARedirectIsAFailedDeliveryNotFollowed: a gateway (or whoever took its
// address) that answers 307 to another host gets neither the code nor its
// signature posted there; the delivery fails at once, without retries,
// also with a caller's client that follows redirects.
func TestARedirectIsAFailedDeliveryNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		var calls atomic.Int32
		redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			http.Redirect(w, r, other.URL+"/steal", status)
		}))
		for _, client := range []*http.Client{nil, http.DefaultClient} {
			s, err := codewebhook.New(codewebhook.Config{URL: redirecting.URL, Secret: secret, Client: client})
			if err != nil {
				t.Fatal(err)
			}
			calls.Store(0)
			err = s.Send(context.Background(), code)
			if err == nil || !strings.Contains(err.Error(), "redirect") {
				t.Errorf("%d: Send = %v, want a failed delivery naming the redirect", status, err)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("%d: the gateway was asked %d times, want once (a redirect is final)", status, n)
			}
		}
		redirecting.Close()
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect's target got %d requests: the code and its signature were re-posted", n)
	}
	if http.DefaultClient.CheckRedirect != nil {
		t.Fatal("the caller's client was changed")
	}
}
