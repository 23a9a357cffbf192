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

func TestACodeIsSixDigitsAndWorksOnceUnderItsChallenge(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix})
		code, err := c.Issue(ctx, phone, "198.51.100.1")
		if err != nil || !logincode.WellFormed(code.Code) || code.Phone != phone || !logincode.WellFormedChallenge(code.Challenge) {
			t.Fatalf("Issue = %+v, %v; want six digits and a challenge for %s", code, err, phone)
		}
		if until := time.Until(code.ExpiresAt); until < 4*time.Minute || until > 5*time.Minute+time.Second {
			t.Errorf("ExpiresAt is %v from now, want the 5m TTL", until)
		}
		if v, _ := c.Verify(ctx, phone, code.Challenge, wrongOf(code.Code)); v != logincode.Wrong {
			t.Fatalf("a wrong guess was judged %v, want Wrong", v)
		}
		if v, err := c.Verify(ctx, "+8613811119999", code.Challenge, code.Code); v != logincode.NoCode || err != nil {
			t.Fatalf("the right code and challenge for another phone were judged %v (%v), want NoCode", v, err)
		}
		if v, err := c.Verify(ctx, phone, code.Challenge, code.Code); v != logincode.Accepted || err != nil {
			t.Fatalf("the right code was judged %v (%v), want Accepted", v, err)
		}
		if v, _ := c.Verify(ctx, phone, code.Challenge, code.Code); v != logincode.NoCode {
			t.Fatalf("a used code was judged %v, want NoCode", v)
		}
	})
}

// TestGuessesOnAnotherChallengeNeverBurnTheOwnersCode is the cycling attack
// of the review: an attacker asks for codes of the victim's phone and
// guesses on them until they burn. Under the old one-code-a-phone shape
// that burned (and replaced) the owner's code; now each guess lands on the
// challenge it was sent with.
func TestGuessesOnAnotherChallengeNeverBurnTheOwnersCode(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix, PerPhone: 5})
		owner, err := c.Issue(ctx, phone, "198.51.100.1")
		if err != nil {
			t.Fatal(err)
		}
		for range 4 { // the attacker's codes, the rest of the budget
			mine, err := c.Issue(ctx, phone, "198.51.100.1")
			if err != nil {
				t.Fatal(err)
			}
			for g := range 5 {
				guess := fmt.Sprintf("%06d", g)
				if guess == owner.Code {
					guess = wrongOf(guess)
				}
				c.Verify(ctx, phone, mine.Challenge, guess)
			}
			// And the owner's code guessed under the attacker's challenge.
			if v, _ := c.Verify(ctx, phone, mine.Challenge, owner.Code); v == logincode.Accepted {
				t.Fatal("the owner's code was accepted under the attacker's challenge")
			}
		}
		if v, _ := c.Verify(ctx, phone, owner.Challenge, owner.Code); v != logincode.Accepted {
			t.Fatalf("after 4 codes of guesses on other challenges the owner's code was judged %v, want Accepted", v)
		}
	})
}

func TestCodesOfOnePhoneCoexistUpToTheBudget(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix, PerPhone: 3, Window: 15 * time.Minute})
		var codes []core.LoginCode
		for i := range 3 {
			code, err := c.Issue(ctx, phone, "198.51.100.1")
			if err != nil {
				t.Fatalf("code %d of a budget of 3: %v", i+1, err)
			}
			codes = append(codes, code)
		}
		_, err := c.Issue(ctx, phone, "198.51.100.1")
		var spent *logincode.BudgetSpentError
		if !errors.As(err, &spent) || spent.RetryAfter < 14*time.Minute || spent.RetryAfter > 15*time.Minute {
			t.Fatalf("a fourth code = %v, want BudgetSpentError with about 15 minutes to wait", err)
		}
		if core.CodeOf(err) != core.CodeRateLimited {
			t.Errorf("BudgetSpentError is code %s, want rate_limited", core.CodeOf(err))
		}
		// Using a code gives no budget back: the SMS was sent.
		if v, _ := c.Verify(ctx, phone, codes[2].Challenge, codes[2].Code); v != logincode.Accepted {
			t.Fatalf("the newest code: %v", v)
		}
		if _, err := c.Issue(ctx, phone, "198.51.100.1"); !errors.As(err, &spent) {
			t.Fatalf("a code after one was used: %v, want the budget still spent", err)
		}
		// The first code still works: a later one never replaced it.
		if v, _ := c.Verify(ctx, phone, codes[0].Challenge, codes[0].Code); v != logincode.Accepted {
			t.Fatalf("the first code after two more were issued: %v, want Accepted", v)
		}
		// Another phone has a budget of its own.
		if _, err := c.Issue(ctx, "+8613811113333", "198.51.100.1"); err != nil {
			t.Fatalf("another phone: %v", err)
		}
	})
}

func TestTheBudgetRollsWithItsWindow(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix, PerPhone: 2, Window: 1500 * time.Millisecond})
		c.Issue(ctx, phone, "198.51.100.1")
		time.Sleep(700 * time.Millisecond)
		c.Issue(ctx, phone, "198.51.100.1")
		var spent *logincode.BudgetSpentError
		if _, err := c.Issue(ctx, phone, "198.51.100.1"); !errors.As(err, &spent) || spent.RetryAfter > 900*time.Millisecond {
			t.Fatalf("third code: %v, want spent until the first leaves the window (≤ 0.8 s)", err)
		}
		time.Sleep(900 * time.Millisecond)
		if _, err := c.Issue(ctx, phone, "198.51.100.1"); err != nil {
			t.Fatalf("after the first code left the window: %v", err)
		}
		if _, err := c.Issue(ctx, phone, "198.51.100.1"); !errors.As(err, &spent) {
			t.Fatalf("the second code is still in the window: %v, want spent", err)
		}
	})
}

func TestAWithdrawnCodeIsGoneAndGivesItsBudgetBack(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix, PerPhone: 1})
		code, _ := c.Issue(ctx, phone, "198.51.100.1")
		if err := c.Withdraw(ctx, code); err != nil {
			t.Fatal(err)
		}
		if v, _ := c.Verify(ctx, phone, code.Challenge, code.Code); v != logincode.NoCode {
			t.Fatalf("a withdrawn code was judged %v, want NoCode", v)
		}
		newer, err := c.Issue(ctx, phone, "198.51.100.1")
		if err != nil {
			t.Fatalf("Issue after a withdrawal with a budget of one: %v", err)
		}
		if v, _ := c.Verify(ctx, phone, newer.Challenge, newer.Code); v != logincode.Accepted {
			t.Fatalf("the newer code was judged %v, want Accepted", v)
		}
	})
}

// TestParallelGuessesAreJudgedAtMostMaxTriesTimes: 200 guesses at once at
// one live code under its challenge (as if the challenge had leaked), the
// right one among them. At most five are judged; the rest find no code;
// the right guess, if it comes after the fifth wrong one, is refused.
func TestParallelGuessesAreJudgedAtMostMaxTriesTimes(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix})
		for run := range 3 {
			p := fmt.Sprintf("+86138111122%02d", run)
			code, err := c.Issue(ctx, p, "198.51.100.1")
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
					v, err := c.Verify(ctx, p, code.Challenge, guess)
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
		}
	})
}

func TestMalformedGuessesAndChallengesAreNotCounted(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix, MaxTries: 2})
		code, _ := c.Issue(ctx, phone, "198.51.100.1")
		for _, g := range []string{"", "12345", "1234567", "12a456", "１２３４５６"} {
			if v, _ := c.Verify(ctx, phone, code.Challenge, g); v != logincode.Wrong {
				t.Errorf("malformed %q judged %v, want Wrong", g, v)
			}
		}
		for _, ch := range []string{"", "x", code.Challenge + "0", "*", code.Challenge[:31] + "G"} {
			if v, _ := c.Verify(ctx, phone, ch, code.Code); v != logincode.NoCode {
				t.Errorf("malformed challenge %q judged %v, want NoCode", ch, v)
			}
		}
		if v, _ := c.Verify(ctx, phone, code.Challenge, code.Code); v != logincode.Accepted {
			t.Fatalf("after malformed guesses the right code was judged %v: they were counted", v)
		}
	})
}

func wrongOf(code string) string {
	b := []byte(code)
	b[0] = '0' + (b[0]-'0'+1)%10
	return string(b)
}

// TestNobodyElseCanSpendTheOwnersBudget is the security review's lockout:
// five code requests from any addresses spent the phone's budget, and the
// owner, asking from a ninth, got 429 for 15 minutes, every 15 minutes.
// Now the budget is each address's own: an attacker on eight addresses
// spends eight budgets, and the owner on a ninth still gets a code and
// logs in with it. The phone's first codes of the window are short; the
// rest (the attacker's 35, the owner's) are ten digits, so the attacker's
// guesses stay bounded by the short codes' 3 × 5.
func TestNobodyElseCanSpendTheOwnersBudget(t *testing.T) {
	testenv.ForEachRedis(t, func(t *testing.T, r testenv.Redis) {
		ctx := context.Background()
		c := logincode.New(r.Client, logincode.Config{Prefix: r.Prefix, PerPhone: 5, Window: 15 * time.Minute})
		lengths := map[int]int{}
		for a := range 8 {
			from := fmt.Sprintf("203.0.113.%d", a+1)
			for i := range 6 {
				code, err := c.Issue(ctx, phone, from)
				var spent *logincode.BudgetSpentError
				switch {
				case i < 5 && err != nil:
					t.Fatalf("address %s, code %d: %v", from, i+1, err)
				case i == 5 && !errors.As(err, &spent):
					t.Fatalf("address %s, a sixth code: %v, want its own budget spent", from, err)
				case err == nil:
					lengths[len(code.Code)]++
				}
			}
		}
		if lengths[6] != 5 || lengths[10] != 35 {
			t.Fatalf("the attacker's codes by length: %v, want the phone's 5 short ones, then 35 of ten digits", lengths)
		}
		owner, err := c.Issue(ctx, phone, "198.51.100.9")
		if err != nil || len(owner.Code) != 10 {
			t.Fatalf("the owner from a ninth address: %+v %v, want a code (of ten digits: the phone is under attack)", owner, err)
		}
		if v, err := c.Verify(ctx, phone, owner.Challenge, owner.Code); err != nil || v != logincode.Accepted {
			t.Fatalf("the owner's code: %v %v, want Accepted", v, err)
		}
	})
}
