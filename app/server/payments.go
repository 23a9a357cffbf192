package server

import (
	"github.com/seckill-lab/seckill/adapters/paysandbox"
	"github.com/seckill-lab/seckill/core"
)

// PayProvider is a payment provider, selected by SECKILL_PAY_PROVIDER. The
// sandbox is built in; a program of its own registers a real provider's
// adapter before it calls Main (or New), the way it registers a queue
// backend or a code sender.
type PayProvider struct {
	// Name is the SECKILL_PAY_PROVIDER value that selects the provider,
	// and the {provider} of its notification URL,
	// /api/payments/{provider}/notify.
	Name string
	// Open makes the provider; it reads its own settings through
	// d.Getenv and fails with an error naming what is missing.
	Open func(d Deps) (core.PaymentProvider, error)
}

func (p PayProvider) name() string { return p.Name }

// SandboxProvider is the built-in sandbox's name: SECKILL_PAY_PROVIDER's
// default on the stand-ins.
const SandboxProvider = paysandbox.Name

var payProviders = registry[PayProvider]{kind: "payment provider"}

// RegisterPayProvider makes a payment provider selectable by
// SECKILL_PAY_PROVIDER. It panics on an empty or taken name, or no Open.
func RegisterPayProvider(p PayProvider) {
	if p.Name == "" || p.Open == nil {
		panic("server: RegisterPayProvider: a provider needs a name and Open")
	}
	payProviders.add(p)
}

// PayProviderNames are the values SECKILL_PAY_PROVIDER accepts.
func PayProviderNames() []string { return payProviders.names() }

func lookupPayProvider(name string) (PayProvider, bool) { return payProviders.lookup(name) }

func init() {
	RegisterPayProvider(PayProvider{
		Name: SandboxProvider,
		Open: func(d Deps) (core.PaymentProvider, error) {
			return paysandbox.New([]byte(d.Config.PaySecret)), nil
		},
	})
}
