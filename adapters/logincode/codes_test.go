package logincode_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/logincode"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

const phone = "+8613811112222"

func TestACodeIsSixDigitsAndWorksOnce(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix})
		code, err := c.Issue(ctx, phone)
		if err != nil || !logincode.WellFormed(code.Code) || code.Phone != phone {
			t.Fatalf("Issue = %+v, %v; want six digits for %s", code, err, phone)
		}
		if until := time.Until(code.ExpiresAt); until < 4*time.Minute || until > 5*time.Minute+time.Second {
			t.Errorf("ExpiresAt is %v from now, want the 5m TTL", until)
		}
		if v, _ := c.Verify(ctx, phone, wrongOf(code.Code)); v != logincode.Wrong {
			t.Fatalf("a wrong guess was judged %v, want Wrong", v)
		}
		if v, err := c.Verify(ctx, phone, code.Code); v != logincode.Accepted || err != nil {
			t.Fatalf("the right code was judged %v (%v), want Accepted", v, err)
		}
		if v, _ := c.Verify(ctx, phone, code.Code); v != logincode.NoCode {
			t.Fatalf("a used code was judged %v, want NoCode", v)
		}
	})
}

func TestALiveCodeHoldsOffAResendButAUsedOneDoesNot(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix})
		code, _ := c.Issue(ctx, phone)
		_, err := c.Issue(ctx, phone)
		var tooSoon *logincode.TooSoonError
		if !errors.As(err, &tooSoon) || tooSoon.RetryAfter <= 0 || tooSoon.RetryAfter > time.Minute {
			t.Fatalf("second Issue = %v, want TooSoonError with a wait up to a minute", err)
		}
		if core.CodeOf(err) != core.CodeRateLimited {
			t.Errorf("TooSoonError is code %s, want rate_limited", core.CodeOf(err))
		}
		c.Verify(ctx, phone, code.Code)
		if _, err := c.Issue(ctx, phone); err != nil {
			t.Fatalf("Issue after the code was used: %v, want a new code at once", err)
		}
	})
}

func TestAWithdrawnCodeIsGoneAndFreesTheResend(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix})
		code, _ := c.Issue(ctx, phone)
		if err := c.Withdraw(ctx, code); err != nil {
			t.Fatal(err)
		}
		if v, _ := c.Verify(ctx, phone, code.Code); v != logincode.NoCode {
			t.Fatalf("a withdrawn code was judged %v, want NoCode", v)
		}
		newer, err := c.Issue(ctx, phone)
		if err != nil {
			t.Fatalf("Issue after a withdrawal: %v", err)
		}
		// Withdrawing the old code again leaves the newer one alone.
		c.Withdraw(ctx, code)
		if newer.Code != code.Code {
			if v, _ := c.Verify(ctx, phone, newer.Code); v != logincode.Accepted {
				t.Fatalf("the newer code was judged %v after the old one's withdrawal, want Accepted", v)
			}
		}
	})
}

// TestParallelGuessesAreJudgedAtMostMaxTriesTimes is the race the review
// found: 200 guesses at once at one live code, the right one among them.
// At most five are judged; the rest find no code; the right guess, if it
// comes after the fifth wrong one, is refused; and the owner's fresh code
// works at once.
func TestParallelGuessesAreJudgedAtMostMaxTriesTimes(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix})
		for run := range 3 {
			p := fmt.Sprintf("+86138111122%02d", run)
			code, err := c.Issue(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			const guesses = 200
			verdicts := make([]logincode.Verdict, guesses)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range guesses {
				guess := fmt.Sprintf("%06d", i) // the right code is among them when it is below 200
				if i == guesses/2 {
					guess = code.Code
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					v, err := c.Verify(ctx, p, guess)
					if err != nil {
						t.Error(err)
					}
					verdicts[i] = v
				}()
			}
			close(start)
			wg.Wait()
			count := map[logincode.Verdict]int{}
			for _, v := range verdicts {
				count[v]++
			}
			judged := count[logincode.Wrong] + count[logincode.Burned] + count[logincode.Accepted]
			if count[logincode.Accepted] > 1 {
				t.Fatalf("run %d: %d guesses were accepted", run, count[logincode.Accepted])
			}
			if count[logincode.Accepted] == 0 && (count[logincode.Wrong] != 4 || count[logincode.Burned] != 1) {
				t.Fatalf("run %d: verdicts %v: want exactly 4 wrong and 1 burning guess before the code was gone", run, count)
			}
			if count[logincode.Accepted] == 1 && count[logincode.Burned] != 0 {
				t.Fatalf("run %d: verdicts %v: the code was both accepted and burned", run, count)
			}
			if judged > 5 {
				t.Fatalf("run %d: %d guesses were judged (%v), want at most 5", run, judged, count)
			}
			fresh, err := c.Issue(ctx, p)
			if err != nil {
				t.Fatalf("run %d: the owner could not get a fresh code at once: %v", run, err)
			}
			if v, _ := c.Verify(ctx, p, fresh.Code); v != logincode.Accepted {
				t.Fatalf("run %d: the fresh code was judged %v", run, v)
			}
		}
	})
}

func TestMalformedGuessesAreNotCounted(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix, MaxTries: 2})
		code, _ := c.Issue(ctx, phone)
		for _, g := range []string{"", "12345", "1234567", "12a456", "１２３４５６"} {
			if v, _ := c.Verify(ctx, phone, g); v != logincode.Wrong {
				t.Errorf("malformed %q judged %v, want Wrong", g, v)
			}
		}
		if v, _ := c.Verify(ctx, phone, code.Code); v != logincode.Accepted {
			t.Fatalf("after malformed guesses the right code was judged %v: they were counted", v)
		}
	})
}

func wrongOf(code string) string {
	b := []byte(code)
	b[0] = '0' + (b[0]-'0'+1)%10
	return string(b)
}
