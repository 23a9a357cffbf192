package core_test

import (
	"testing"

	"github.com/seckill-lab/seckill/core"
)

// TestAnOrderSignatureIsTheDeploymentsAlone: the same secret and prefix
// verify (every process of a deployment); another secret, another prefix
// (a second deployment on the same broker), a changed body or a missing
// or malformed signature do not.
func TestAnOrderSignatureIsTheDeploymentsAlone(t *testing.T) {
	secret := []byte("the-deployments-jwt-secret-0123")
	body := core.EncodeOrder(core.Order{ID: 1 << 40, UserID: 7, VoucherID: 42})
	sig := core.NewOrderSigner(secret, "seckill:").Sign(body)
	if !core.NewOrderSigner(secret, "seckill:").Valid(body, sig) {
		t.Fatal("another process of the deployment does not verify its signature")
	}
	tampered := append([]byte{}, body...)
	tampered[len(tampered)-2] ^= 1
	for name, ok := range map[string]bool{
		"another secret":       core.NewOrderSigner([]byte("another-secret-0123456789abc"), "seckill:").Valid(body, sig),
		"another prefix":       core.NewOrderSigner(secret, "shop2:").Valid(body, sig),
		"a changed body":       core.NewOrderSigner(secret, "seckill:").Valid(tampered, sig),
		"no signature":         core.NewOrderSigner(secret, "seckill:").Valid(body, ""),
		"not hex":              core.NewOrderSigner(secret, "seckill:").Valid(body, "zz"+sig[2:]),
		"a truncated one":      core.NewOrderSigner(secret, "seckill:").Valid(body, sig[:32]),
		"the body's own token": core.NewOrderSigner(secret, "seckill:").Valid(body, string(secret)),
	} {
		if ok {
			t.Errorf("%s verifies", name)
		}
	}
}
