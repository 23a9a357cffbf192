package lab

import (
	"bytes"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-lab/seckill/app/server"
)

// The share of the units a fast scripted client takes, beside
// human-paced shoppers, on the server with its defaults: one sale without
// a room, one with, same shoppers, same stock. The humans press the button
// 0.3 to 2.5 s after it comes alive (the opening, or their turn) and try
// again a second after a refusal; in a room they join at a random moment
// before the opening and look at their place once a second. The script
// holds botAccounts accounts, fires from just before the opening every
// 5 ms per account, and in a room joins at once, polls every 50 ms and
// buys the instant it is let in.
const (
	botUnits     = 50
	botHumans    = 300
	botAccounts  = 30
	botRoomRate  = 10 // admissions a second: the stock over five seconds
	botSaleLimit = 30 * time.Second
)

// botSale is one sale's outcome.
type botSale struct{ human, bot int64 }

func (s botSale) share() float64 { return float64(s.bot) / float64(max(s.human+s.bot, 1)) }

// botShares runs the two sales rounds times, alternating, and reports the
// scripted client's median share of the units in each.
func (b *bench) botShares(rounds int) ([]benchTarget, error) {
	cfg := b.cfg
	cfg.KeyPrefix = "bots" + crand.Text()[:4] + ":"
	p, err := startProcess(cfg, userDefaults(nil))
	if err != nil {
		return nil, err
	}
	defer p.stop()
	defer dropKeys(cfg.RedisURL, cfg.KeyPrefix)
	s := &botSaleRun{base: p.base, admin: cfg.AdminToken, tokens: server.NewTokens(cfg.JWTSecret, 0),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: botHumans + botAccounts}}}
	var plain, room []float64
	for round := 1; round <= rounds; round++ {
		for _, withRoom := range []bool{round%2 == 0, round%2 != 0} {
			progressf("bench: round %d/%d: %d units, %d human-paced shoppers and a script of %d accounts, room %v…",
				round, rounds, botUnits, botHumans, botAccounts, withRoom)
			sale, err := s.run(withRoom, int64(round*10_000))
			if err != nil {
				return nil, err
			}
			progressf("bench:   the script took %d, the humans %d", sale.bot, sale.human)
			if withRoom {
				room = append(room, sale.share())
			} else {
				plain = append(plain, sale.share())
			}
		}
	}
	fair := float64(botAccounts) / float64(botAccounts+botHumans)
	detail := fmt.Sprintf("median of %d sales; %d units, %d humans, a script of %d accounts (%.0f %% of the accounts)",
		rounds, botUnits, botHumans, botAccounts, fair*100)
	return []benchTarget{
		{name: "scripted client's share of the units, no room (reported)", ratio: medianOf(plain), measured: true, detail: detail},
		{name: "scripted client's share of the units, through a room (reported)", ratio: medianOf(room), measured: true,
			detail: fmt.Sprintf("%s; room admits %d a second", detail, botRoomRate)},
	}, nil
}

// botSaleRun is what the sales share: the server, its tokens, a client.
type botSaleRun struct {
	base, admin string
	tokens      *server.Tokens
	client      *http.Client
}

// run sells botUnits to the humans (user ids from+1…) and the script
// (ids after them), with a room or without, and counts who got them.
func (s *botSaleRun) run(withRoom bool, from int64) (botSale, error) {
	begin := time.Now().Add(3 * time.Second)
	voucher, err := s.create(begin, withRoom)
	if err != nil {
		return botSale{}, err
	}
	var human, bot atomic.Int64
	var wg sync.WaitGroup
	for i := range int64(botHumans + botAccounts) {
		user, isBot := from+i+1, i >= botHumans
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.shopper(voucher, user, begin, isBot, withRoom) {
				map[bool]*atomic.Int64{true: &bot, false: &human}[isBot].Add(1)
			}
		}()
	}
	wg.Wait()
	return botSale{human: human.Load(), bot: bot.Load()}, nil
}

func (s *botSaleRun) create(begin time.Time, withRoom bool) (int64, error) {
	req := map[string]any{"title": "bots", "payValue": 1, "actualValue": 2, "stock": botUnits,
		"beginTime": begin.UTC().Format(time.RFC3339Nano), "endTime": begin.Add(time.Hour).UTC().Format(time.RFC3339Nano)}
	if withRoom {
		req["room"] = map[string]any{"opensAt": time.Now().UTC().Format(time.RFC3339Nano), "admitPerSecond": botRoomRate, "admissionTTL": "60s"}
	}
	var v struct {
		ID int64 `json:"id"`
	}
	status, err := s.call("POST", "/api/admin/vouchers", "Bearer "+s.admin, "", req, &v)
	if err != nil || status != http.StatusCreated {
		return 0, fmt.Errorf("create voucher: %d, %v", status, err)
	}
	return v.ID, nil
}

// shopper is one shopper's sale: whether they got a unit.
func (s *botSaleRun) shopper(voucher, user int64, begin time.Time, isBot, withRoom bool) bool {
	token, _ := s.tokens.Issue(user, time.Now())
	auth := "Bearer " + token
	deadline := begin.Add(botSaleLimit)
	react := func() time.Duration { return time.Duration(300+rand.IntN(2200)) * time.Millisecond }
	admission := ""
	if withRoom {
		if !isBot {
			time.Sleep(time.Duration(rand.Int64N(int64(time.Until(begin) - 500*time.Millisecond))))
		}
		var ok bool
		if admission, ok = s.waitTurn(voucher, auth, isBot, deadline); !ok {
			return false
		}
		if !isBot {
			time.Sleep(react())
		}
	} else if isBot {
		time.Sleep(time.Until(begin) - 100*time.Millisecond)
	} else {
		time.Sleep(time.Until(begin) + react())
	}
	for time.Now().Before(deadline) {
		status, _ := s.call("POST", fmt.Sprintf("/api/vouchers/%d/seckill", voucher), auth, admission, nil, nil)
		switch status {
		case http.StatusOK:
			return true
		case http.StatusConflict:
			return false // sold out, or already bought
		}
		time.Sleep(map[bool]time.Duration{true: 5 * time.Millisecond, false: time.Second}[isBot])
	}
	return false
}

// waitTurn joins the room and polls until the shopper is let in: their
// admission, or false once sold out (or their place lapsed).
func (s *botSaleRun) waitTurn(voucher int64, auth string, isBot bool, deadline time.Time) (string, bool) {
	path := fmt.Sprintf("/api/vouchers/%d/room", voucher)
	var place struct {
		State     string  `json:"state"`
		Admission *string `json:"admission"`
	}
	if status, err := s.call("POST", path, auth, "", nil, &place); err != nil || status != http.StatusOK {
		return "", false
	}
	for time.Now().Before(deadline) {
		switch {
		case place.State == "admitted" && place.Admission != nil:
			return *place.Admission, true
		case place.State == "sold_out" || place.State == "not_joined":
			return "", false
		}
		time.Sleep(map[bool]time.Duration{true: 50 * time.Millisecond, false: time.Second}[isBot])
		s.call("GET", path, auth, "", nil, &place)
	}
	return "", false
}

// call sends a request and decodes a JSON answer into out (if set).
func (s *botSaleRun) call(method, path, auth, admission string, body, out any) (int, error) {
	var r *bytes.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	} else {
		r = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, s.base+path, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	if admission != "" {
		req.Header.Set("X-Seckill-Admission", admission)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode, err
}
