package lab

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/seckill-lab/seckill/app/server"
)

// loadResult is what one load run measured.
type loadResult struct {
	Requests  int64
	Duration  time.Duration
	Latencies []time.Duration // sorted
	Status    map[int]int64
	Errors    int64 // transport errors
	// LastOK is when the last 200 was answered, FirstConflict the first
	// 409 (a new shopper's is sold out): a sale that refused a shopper
	// before it sold its last unit told them sold out that much too early.
	LastOK, FirstConflict time.Time
}

func (r loadResult) perSecond() float64 {
	if r.Duration <= 0 {
		return 0 // never ran
	}
	return float64(r.Requests) / r.Duration.Seconds()
}

func (r loadResult) percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.Latencies)-1) * p)
	return r.Latencies[i]
}

// loadRequest is one request of a load run: a POST without body.
type loadRequest struct {
	URL           string
	Authorization string
}

// runLoad sends requests from conns keep-alive connections until duration
// passes or limit requests were sent (0: no limit). next builds request n
// (numbered from 0).
//
// The client is fasthttp's, not net/http's: the load generator shares the
// machine's cores with the server, Redis and MySQL, and against the same
// in-process server a net/http client cost 64–77 µs of CPU per request
// (client and server together) where fasthttp's cost 29–39 µs. Both sides
// of every ratio in `seckill-lab bench` use this same tool.
func runLoad(ctx context.Context, conns int, duration time.Duration, limit int64, next func(n int64) loadRequest) loadResult {
	first := next(0)
	client := &fasthttp.HostClient{
		Addr:                          hostOf(first.URL),
		MaxConns:                      conns,
		ReadTimeout:                   10 * time.Second,
		WriteTimeout:                  10 * time.Second,
		MaxIdleConnDuration:           time.Minute,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	var counter atomic.Int64
	var mu sync.Mutex
	res := loadResult{Status: map[int]int64{}}
	start := time.Now()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			c := connLoad{status: map[int]int64{}, latencies: make([]time.Duration, 0, 4096)}
			c.run(ctx, client, func() (loadRequest, bool) {
				n := counter.Add(1) - 1
				if limit > 0 && n >= limit {
					return loadRequest{}, false
				}
				return next(n), true
			})
			mu.Lock()
			c.addTo(&res)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Duration = time.Since(start)
	res.Requests = int64(len(res.Latencies))
	slices.Sort(res.Latencies)
	return res
}

// connLoad is what one connection of a load run saw.
type connLoad struct {
	latencies             []time.Duration
	status                map[int]int64
	errors                int64
	lastOK, firstConflict time.Time
}

// run sends the requests next hands out, one at a time, until ctx ends or
// next has none left.
func (c *connLoad) run(ctx context.Context, client *fasthttp.HostClient, next func() (loadRequest, bool)) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	lastURL := ""
	for ctx.Err() == nil {
		r, ok := next()
		if !ok {
			return
		}
		// The request is reused: its URL is parsed again only when it
		// changes, and the token header is overwritten.
		if r.URL != lastURL {
			req.Reset()
			req.Header.SetMethod(fasthttp.MethodPost)
			req.SetRequestURI(r.URL)
			lastURL = r.URL
		}
		if r.Authorization != "" {
			req.Header.Set("Authorization", r.Authorization)
		} else {
			req.Header.Del("Authorization")
		}
		t0 := time.Now()
		if err := client.Do(req, resp); err != nil {
			if ctx.Err() == nil {
				c.errors++
			}
			continue
		}
		done := time.Now()
		c.latencies = append(c.latencies, done.Sub(t0))
		code := resp.StatusCode()
		c.status[code]++
		switch {
		case code == fasthttp.StatusOK:
			c.lastOK = done
		case code == fasthttp.StatusConflict && c.firstConflict.IsZero():
			c.firstConflict = done
		}
	}
}

// addTo adds what the connection saw to the run's result.
func (c *connLoad) addTo(res *loadResult) {
	if c.lastOK.After(res.LastOK) {
		res.LastOK = c.lastOK
	}
	if !c.firstConflict.IsZero() && (res.FirstConflict.IsZero() || c.firstConflict.Before(res.FirstConflict)) {
		res.FirstConflict = c.firstConflict
	}
	res.Latencies = append(res.Latencies, c.latencies...)
	for k, v := range c.status {
		res.Status[k] += v
	}
	res.Errors += c.errors
}

// hostOf is the host:port of an http:// URL.
func hostOf(url string) string {
	rest := strings.TrimPrefix(url, "http://")
	host, _, _ := strings.Cut(rest, "/")
	return host
}

// buyRequests makes request n a seckill on the server at base by shopper
// firstUser+n, for the vouchers in turn. The first expected tokens are
// signed before the run, on all cores, so the timed region spends the load
// generator's CPU on requests, not on HMACs; later requests sign their own.
func buyRequests(base string, tokens *server.Tokens, vouchers []int64, firstUser, expected int64) func(int64) loadRequest {
	urls := make([]string, len(vouchers))
	for i, v := range vouchers {
		urls[i] = base + "/api/vouchers/" + idString(v) + "/seckill"
	}
	signed := mintTokens(tokens, firstUser, expected)
	return func(n int64) loadRequest {
		url := urls[n%int64(len(urls))]
		if n < int64(len(signed)) {
			return loadRequest{URL: url, Authorization: signed[n]}
		}
		tok, _ := tokens.Issue(firstUser+n, time.Now())
		return loadRequest{URL: url, Authorization: "Bearer " + tok}
	}
}

// mintTokens signs "Bearer" headers for shoppers first … first+count-1.
func mintTokens(tokens *server.Tokens, first, count int64) []string {
	out := make([]string, count)
	now := time.Now()
	workers := int64(runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < count; i += workers {
				tok, _ := tokens.Issue(first+i, now)
				out[i] = "Bearer " + tok
			}
		})
	}
	wg.Wait()
	return out
}
