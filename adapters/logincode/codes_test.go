package logincode_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seckill-lab/seckill/adapters/logincode"
	"github.com/seckill-lab/seckill/adapters/testenv"
)

func TestCodes(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix, MaxTries: 3})

		code, err := c.Issue(ctx, "111")
		if err != nil || len(code) != 6 {
			t.Fatalf("Issue = %q, %v", code, err)
		}
		if _, err := c.Issue(ctx, "111"); !errors.Is(err, logincode.ErrTooSoon) {
			t.Fatalf("second Issue err = %v, want ErrTooSoon", err)
		}
		if ok, _ := c.Verify(ctx, "111", "nope"); ok {
			t.Fatal("a wrong code verified")
		}
		if ok, err := c.Verify(ctx, "111", code); !ok || err != nil {
			t.Fatalf("the right code failed: %v", err)
		}
		if ok, _ := c.Verify(ctx, "111", code); ok {
			t.Fatal("a code verified twice")
		}

		// MaxTries wrong guesses burn the code: brute force gets nowhere.
		code, _ = c.Issue(ctx, "222")
		for range 3 {
			c.Verify(ctx, "222", "000000x")
		}
		if ok, _ := c.Verify(ctx, "222", code); ok {
			t.Fatal("the code still worked after MaxTries wrong guesses")
		}
	})
}
