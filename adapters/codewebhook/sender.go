// Package codewebhook delivers login codes by POSTing each one to an SMS
// gateway's webhook, signed so the gateway can tell the codes are ours:
//
//	POST <URL>
//	Content-Type: application/json
//	X-Seckill-Signature: sha256=<hex HMAC-SHA256 of the raw body with Secret>
//
//	{"phone":"+8613811112222","code":"123456","expiresAt":"2026-12-01T18:05:00Z"}
//
// A 2xx answer is delivery. Network errors, 429 and 5xx answers are
// retried with exponential backoff within the caller's deadline; other
// answers are final (the gateway refused the request: retrying it would
// not help). A redirect is never followed — it would re-post the code and
// its signature to wherever the answer points — and is a failed delivery.
package codewebhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/seckill-lab/seckill/adapters/internal/bodysig"
	"github.com/seckill-lab/seckill/core"
)

// SignatureHeader carries the body's signature.
const SignatureHeader = bodysig.Header

// Config configures the sender. URL and Secret are required.
type Config struct {
	// URL is the gateway's endpoint (SECKILL_CODE_WEBHOOK_URL), http or https.
	URL string
	// Secret signs every body (SECKILL_CODE_WEBHOOK_SECRET).
	Secret []byte
	// Client sends the requests. Default: a client with a 2 s timeout per
	// attempt (the caller's deadline bounds all attempts together). The
	// sender never follows a redirect, whatever the client's CheckRedirect.
	Client *http.Client
	// Attempts bounds the tries of one code. Default 3.
	Attempts uint
	// RetryInitial is the first wait between attempts, doubling after.
	// Default 100ms.
	RetryInitial time.Duration
}

// Validate reports what is missing or malformed.
func (c Config) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("codewebhook: URL must be an absolute http or https URL")
	}
	if len(c.Secret) == 0 {
		return errors.New("codewebhook: a secret is required to sign the codes")
	}
	return nil
}

// Sender is a core.CodeSender over a webhook.
type Sender struct{ cfg Config }

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 2 * time.Second}
	}
	// A copy, so the caller's client keeps its own redirect policy.
	client := *cfg.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.Client = &client
	if cfg.Attempts == 0 {
		cfg.Attempts = 3
	}
	if cfg.RetryInitial <= 0 {
		cfg.RetryInitial = 100 * time.Millisecond
	}
	return &Sender{cfg: cfg}, nil
}

// payload is the body the gateway receives.
type payload struct {
	Phone     string    `json:"phone"`
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Sign is the signature header's value for body (for a receiver to
// check against).
func Sign(secret, body []byte) string { return bodysig.Sign(secret, body) }

// Send implements core.CodeSender.
func (s *Sender) Send(ctx context.Context, code core.LoginCode) error {
	body, err := json.Marshal(payload{Phone: code.Phone, Code: code.Code, ExpiresAt: code.ExpiresAt.UTC()})
	if err != nil {
		return fmt.Errorf("codewebhook: %w", err)
	}
	signature := Sign(s.cfg.Secret, body)
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = s.cfg.RetryInitial
	_, err = backoff.Retry(ctx, func() (struct{}, error) {
		return struct{}{}, s.post(ctx, body, signature)
	}, backoff.WithBackOff(b), backoff.WithMaxTries(s.cfg.Attempts))
	if err != nil {
		return fmt.Errorf("codewebhook: %w", err)
	}
	return nil
}

// post makes one attempt; a final refusal is a backoff.Permanent error.
func (s *Sender) post(ctx context.Context, body []byte, signature string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return backoff.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, signature)
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	// Drained (a little) so the connection is reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("gateway answered %s", resp.Status)
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return backoff.Permanent(fmt.Errorf("gateway redirected (%s, to %q): not followed, the code is not delivered", resp.Status, resp.Header.Get("Location")))
	}
	return backoff.Permanent(fmt.Errorf("gateway refused the code: %s", resp.Status))
}

var _ core.CodeSender = (*Sender)(nil)
