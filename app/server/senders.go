package server

import (
	"net/url"

	"github.com/seckill-lab/seckill/adapters/codewebhook"
	"github.com/seckill-lab/seckill/core"
)

// CodeSender is a way of delivering login codes, selected by
// SECKILL_CODE_SENDER. The webhook sender is built in; a program of its
// own registers more (an SMS provider's SDK) before it calls Main (or
// New), the way it registers a queue backend.
type CodeSender struct {
	// Name is the SECKILL_CODE_SENDER value that selects the sender.
	Name string
	// Open makes the sender; it reads its own settings through d.Getenv
	// and fails with an error naming what is missing.
	Open func(d Deps) (core.CodeSender, error)
}

// WebhookSender is the built-in sender's name: SECKILL_CODE_SENDER's
// default when SECKILL_CODE_WEBHOOK_URL is set.
const WebhookSender = "webhook"

var senders = registry[CodeSender]{kind: "code sender"}

// RegisterCodeSender makes a code sender selectable by SECKILL_CODE_SENDER.
// It panics on an empty or taken name, or no Open: programming errors,
// found at start.
func RegisterCodeSender(s CodeSender) {
	if s.Name == "" || s.Open == nil {
		panic("server: RegisterCodeSender: a sender needs a name and Open")
	}
	senders.add(s)
}

// CodeSenderNames are the values SECKILL_CODE_SENDER accepts.
func CodeSenderNames() []string { return senders.names() }

func lookupCodeSender(name string) (CodeSender, bool) { return senders.lookup(name) }

func init() {
	RegisterCodeSender(CodeSender{
		Name: WebhookSender,
		Open: func(d Deps) (core.CodeSender, error) {
			s, err := codewebhook.New(codewebhook.Config{
				URL:    d.Config.CodeWebhookURL,
				Secret: []byte(d.Config.CodeWebhookSecret),
			})
			if err != nil {
				return nil, &configError{"SECKILL_CODE_WEBHOOK_URL", redactURL(d.Config.CodeWebhookURL), "with SECKILL_CODE_WEBHOOK_SECRET: " + err.Error()}
			}
			real := !d.Config.EmbeddedRedis() || !d.Config.EmbeddedSQL()
			if u, _ := url.Parse(d.Config.CodeWebhookURL); real && u != nil && u.Scheme == "http" {
				d.Log.Warn("SECKILL_CODE_WEBHOOK_URL is plain http://: every login code crosses the network readable by anyone on the path; use https:// unless the gateway is on this host or a private link",
					"url", redactURL(d.Config.CodeWebhookURL))
			}
			return s, nil
		},
	})
}
