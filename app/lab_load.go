package main

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// loadResult is what one load run measured.
type loadResult struct {
	Requests  int64
	Duration  time.Duration
	Latencies []time.Duration // sorted
	Status    map[int]int64
	Errors    int64 // transport errors
}

func (r loadResult) perSecond() float64 { return float64(r.Requests) / r.Duration.Seconds() }

func (r loadResult) percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.Latencies)-1) * p)
	return r.Latencies[i]
}

// runLoad sends requests from conns keep-alive connections until duration
// passes or limit requests were sent (0: no limit). next builds request n
// (numbered from 0) and is called outside the timed region.
func runLoad(ctx context.Context, conns int, duration time.Duration, limit int64, next func(n int64) *http.Request) loadResult {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute,
	}}
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
			local := make([]time.Duration, 0, 4096)
			status := map[int]int64{}
			var errs int64
			for ctx.Err() == nil {
				n := counter.Add(1) - 1
				if limit > 0 && n >= limit {
					break
				}
				req := next(n)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs++
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				local = append(local, time.Since(t0))
				status[resp.StatusCode]++
			}
			mu.Lock()
			res.Latencies = append(res.Latencies, local...)
			for k, v := range status {
				res.Status[k] += v
			}
			res.Errors += errs
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Duration = time.Since(start)
	res.Requests = int64(len(res.Latencies))
	slices.Sort(res.Latencies)
	return res
}
