package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/app/server"
	"github.com/seckill-lab/seckill/core"
)

// rpushQueue is a backend of a program of its own, written against the
// exported API only: the reservation RPUSHes each order to a list none of
// the built-in backends uses, and consumers LPOP it from the left. It
// promises nothing but keeping what nobody consumed yet. Three methods
// make the queue: what it is, as data, and its consumers.
type rpushQueue struct {
	rdb redis.UniversalClient
	key string
}

// Capabilities declare the hand-off the reservation script runs: the
// adapter's own command.
func (q *rpushQueue) Capabilities() core.Capabilities {
	return core.Capabilities{
		Name:       "rpush-ext",
		Guarantees: core.Guarantees{RetainsWithoutConsumer: true},
		Handoff: &core.Handoff{
			Command: []string{"RPUSH", core.HandoffKey, core.HandoffBody},
			Key:     func(int64) string { return q.key },
		},
	}
}
func (q *rpushQueue) Consumer(context.Context, int) (core.Consumer, error) {
	return rpushConsumer{q}, nil
}
func (q *rpushQueue) Close() error { return nil }

type rpushConsumer struct{ q *rpushQueue }

func (c rpushConsumer) Fetch(ctx context.Context, max int) ([]core.Delivery, error) {
	bodies, err := c.q.rdb.LPopCount(ctx, c.q.key, max).Result()
	if err != nil && err != redis.Nil {
		return nil, err
	}
	if len(bodies) == 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
			return nil, nil
		}
	}
	ds := make([]core.Delivery, len(bodies))
	for i, b := range bodies {
		ds[i] = core.Delivery{ID: strconv.Itoa(i), Body: []byte(b), Attempt: 1}
	}
	return ds, nil
}

func (c rpushConsumer) Ack(context.Context, []core.Delivery) error { return nil }
func (c rpushConsumer) Close() error                               { return nil }
func (c rpushConsumer) DeadLetter(ctx context.Context, d core.Delivery, reason string) error {
	return c.q.rdb.RPush(ctx, c.q.key+":dead", d.Body).Err()
}

var registerOnce sync.Once

// registerRPush registers the backend as a program would, before it loads
// its configuration. Its own setting comes through Deps.Getenv.
// rpushOpened is the list key the registered backend last opened on.
var rpushOpened atomic.Pointer[string]

func registerRPush() {
	registerOnce.Do(func() {
		server.Register(server.Backend{
			Name:      "rpush-ext",
			Iteration: "a program's own: RPUSH in the script, LPOP",
			Open: func(_ context.Context, d server.Deps) (core.Queue, error) {
				key := d.Getenv("RPUSH_EXT_KEY")
				if key == "" {
					key = d.QueueKey("rpush-ext")
				}
				rpushOpened.Store(&key)
				return &rpushQueue{rdb: d.Redis, key: key}, nil
			},
		})
	})
}

// TestAProgramRegistersItsOwnBackend: a backend registered from outside
// this repository's packages is selected by SECKILL_QUEUE, fed by the
// reservation script through its own hand-off, and a sale over HTTP ends
// with every accepted order in the database, exactly the stock sold.
func TestAProgramRegistersItsOwnBackend(t *testing.T) {
	registerRPush()
	if !slices.Contains(server.BackendNames(), "rpush-ext") {
		t.Fatalf("registered backend missing from %v", server.BackendNames())
	}
	for _, stack := range []string{"embedded", "real"} {
		t.Run(stack, func(t *testing.T) {
			prefix := "ext" + testenv.RandomSuffix() + ":"
			listKey := prefix + "my-own-list"
			env := map[string]string{
				"SECKILL_QUEUE": "rpush-ext", "RPUSH_EXT_KEY": listKey, "SECKILL_ADDR": "127.0.0.1:0",
				"SECKILL_KEY_PREFIX": prefix, "SECKILL_JWT_SECRET": testenv.Secret(),
				"SECKILL_ADMIN_TOKEN": testenv.Secret(), "SECKILL_SECKILL_RATE": "0",
			}
			var rdb redis.UniversalClient
			if stack == "real" {
				r, ok := testenv.RealRedis(t)
				if !ok {
					t.Skipf("%s is not set: real stack not tested (CI sets it)", testenv.RedisURLEnv)
				}
				dsn, ok := testenv.MySQLDatabase(t)
				if !ok {
					t.Skipf("%s is not set", testenv.MySQLDSNEnv)
				}
				env["SECKILL_REDIS_URL"], env["SECKILL_MYSQL_DSN"] = os.Getenv(testenv.RedisURLEnv), dsn
				rdb = r.Client
			}
			cfg, err := server.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			srv, err := server.New(ctx, cfg, nil)
			if err != nil {
				stop()
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx, ln) }()
			defer func() {
				stop()
				if err := <-served; err != nil {
					t.Errorf("serve: %v", err)
				}
				srv.Close()
			}()
			if opened := rpushOpened.Load(); opened == nil || *opened != listKey {
				t.Fatalf("the registered backend opened on %v, want %s", opened, listKey)
			}
			base := "http://" + ln.Addr().String()

			const stock, shoppers = 40, 150
			voucher := createVoucher(t, base, cfg.AdminToken, stock)
			tokens := server.NewTokens(cfg.JWTSecret, 0)
			var mu sync.Mutex
			answered := map[string]bool{}
			var wg sync.WaitGroup
			for u := int64(1); u <= shoppers; u++ {
				wg.Go(func() {
					tok, _ := tokens.Issue(u, time.Now())
					status, body := call(t, "POST", fmt.Sprintf("%s/api/vouchers/%d/seckill", base, voucher), tok)
					if status == 200 {
						mu.Lock()
						answered[body["orderId"].(string)] = true
						mu.Unlock()
					} else if status != 409 {
						t.Errorf("seckill: %d %v", status, body)
					}
				})
			}
			wg.Wait()
			if len(answered) != stock {
				t.Fatalf("%d orders accepted, want the stock, %d", len(answered), stock)
			}
			var ids []int64
			deadline := time.Now().Add(15 * time.Second)
			for len(ids) < stock && time.Now().Before(deadline) {
				ids = ids[:0]
				err := srv.TestHooks().Database().NewSelect().Table("tb_voucher_order").Column("id").
					Where("voucher_id = ?", voucher).Scan(context.Background(), &ids)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(ids) != stock {
				t.Fatalf("%d of %d accepted orders in the database", len(ids), stock)
			}
			for _, id := range ids {
				if !answered[strconv.FormatInt(id, 10)] {
					t.Fatalf("row %d was never answered to a shopper", id)
				}
			}
			if rdb != nil && len(rdb.Keys(context.Background(), prefix+"orders*").Val()) != 0 {
				t.Fatal("a built-in queue key was written: the hand-off was not the backend's own")
			}
		})
	}
}

func createVoucher(t *testing.T, base, admin string, stock int) int64 {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"title": "ext", "payValue": 1, "actualValue": 2, "stock": stock,
		"beginTime": time.Now().Add(-time.Minute).Format(time.RFC3339), "endTime": time.Now().Add(time.Hour).Format(time.RFC3339)})
	req, _ := http.NewRequest("POST", base+"/api/admin/vouchers", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != 201 {
		t.Fatalf("create voucher: %d %v", resp.StatusCode, out)
	}
	return int64(out["id"].(float64))
}

func call(t *testing.T, method, url, token string) (int, map[string]any) {
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// smsOutbox is a code sender of a program of its own (an SMS provider's
// SDK would sit here), written against the exported API only.
type smsOutbox struct {
	mu    sync.Mutex
	codes map[string]string
}

func (o *smsOutbox) Send(_ context.Context, c core.LoginCode) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.codes[c.Phone] = c.Code
	return nil
}

func TestAProgramRegistersItsOwnCodeSender(t *testing.T) {
	outbox := &smsOutbox{codes: map[string]string{}}
	server.RegisterCodeSender(server.CodeSender{
		Name: "outbox-ext",
		Open: func(d server.Deps) (core.CodeSender, error) {
			if d.Getenv("OUTBOX_REGION") != "cn-north" {
				return nil, fmt.Errorf("OUTBOX_REGION is not cn-north")
			}
			return outbox, nil
		},
	})
	env := map[string]string{"SECKILL_ADDR": "127.0.0.1:0", "SECKILL_DEV_CODES": "0", "SECKILL_DEMO_SALE": "0",
		"SECKILL_CODE_SENDER": "outbox-ext", "OUTBOX_REGION": "cn-north"}
	cfg, err := server.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := server.New(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	post := func(path, body string) (int, map[string]any) {
		resp, err := http.Post("http://"+ln.Addr().String()+path, "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	status, sent := post("/api/auth/code", `{"phone":"13811112222"}`)
	if status != 200 || sent["code"] != nil {
		t.Fatalf("code: %d %v (no code in the answer without dev codes)", status, sent)
	}
	outbox.mu.Lock()
	code := outbox.codes["+8613811112222"]
	outbox.mu.Unlock()
	if status, body := post("/api/auth/login", `{"phone":"13811112222","code":"`+code+`","challenge":"`+sent["challenge"].(string)+`"}`); status != 200 || body["token"] == nil {
		t.Fatalf("login with the outbox's code %q: %d %v", code, status, body)
	}
	cancel()
	<-served
}
