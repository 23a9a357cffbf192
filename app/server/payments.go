package server

import (
	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/paysandbox"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/payments"
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
	// withPages, if set, opens a built-in provider that serves pages of
	// its own (the sandbox's pay page) instead of Open.
	withPages func(d Deps) (core.PaymentProvider, providerPages)
}

// providerPages are a provider's own routes, over the shop's payments.
type providerPages func(s *Server, payments *payments.Service) routeGroup

func noPages(*Server, *payments.Service) routeGroup { return noRoutes{} }

// open opens the provider and says what pages of its own it serves.
func (p PayProvider) open(d Deps) (core.PaymentProvider, providerPages, error) {
	if p.withPages != nil {
		provider, pages := p.withPages(d)
		return provider, pages, nil
	}
	provider, err := p.Open(d)
	return provider, noPages, err
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
		Open: func(d Deps) (core.PaymentProvider, error) { return openSandbox(d), nil },
		withPages: func(d Deps) (core.PaymentProvider, providerPages) {
			sandbox := openSandbox(d)
			return sandbox, func(s *Server, payments *payments.Service) routeGroup {
				routes := newSandboxRoutes(s, sandbox, payments)
				s.background.sweeps = append(s.background.sweeps, routes.courier.Duty())
				return routes
			}
		},
	})
}

// openSandbox is the sandbox over its books in the shop's database.
func openSandbox(d Deps) *paysandbox.Sandbox {
	return paysandbox.New(paysandbox.Config{Secret: []byte(d.Config.PaySecret), Books: mysqlstore.NewSandboxBooks(d.Store),
		DropNotices: d.Config.PaySandboxDropNotices, DelayNotices: d.Config.PaySandboxDelayNotices})
}
