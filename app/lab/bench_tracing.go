package lab

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// tracingCost sets the seckill endpoint with tracing on at 1 % sampling
// (OTLP http/protobuf to a collector of the bench's own that takes and
// drops the spans) against the same with tracing off, in alternated
// rounds: the throughput tracing costs a team that turns it on as
// docs/production.md says. The bound: at most 5 %.
func (b *bench) tracingCost(rounds int) (benchTarget, error) {
	name := "tracing on at 1 % ÷ off, seckill endpoint"
	sink, err := startSpanSink()
	if err != nil {
		return benchTarget{name: name, detail: "not run: " + err.Error()}, nil
	}
	defer sink.close()
	on := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + sink.addr,
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0.01",
	}
	var off, traced []benchRun
	err = alternateRounds(rounds, []benchSide{
		{"seckill endpoint, tracing off", func() (benchRun, error) { return b.endpointWith("streamgroup", 0, nil, profiles{}) }, &off},
		{"the same, tracing on at 1 %", func() (benchRun, error) { return b.endpointWith("streamgroup", 0, on, profiles{}) }, &traced},
	})
	if err != nil {
		return benchTarget{}, err
	}
	if sink.posts.Load() == 0 {
		return benchTarget{}, fmt.Errorf("tracing on: no span reached the collector; the measurement would be of nothing")
	}
	mo, mt := median(off), median(traced)
	return benchTarget{name: name, ratio: pairedRatio(benchRates(traced), benchRates(off)), target: 0.95, measured: true,
		detail: fmt.Sprintf("median of %d rounds' ratios; median rates %.0f and %.0f req/s; %d exports, %d KB of spans",
			rounds, mt.rate, mo.rate, sink.posts.Load(), sink.bytes.Load()>>10)}, nil
}

// benchSide is one side of alternated rounds.
type benchSide struct {
	what string
	run  func() (benchRun, error)
	into *[]benchRun
}

// alternateRounds runs each side once a round, the order rotating each
// round, so a burst of noise on this shared machine lands on every side.
func alternateRounds(rounds int, sides []benchSide) error {
	for n := 1; n <= rounds; n++ {
		for i := range sides {
			side := sides[(n-1+i)%len(sides)]
			progressf("bench: round %d/%d: %s…", n, rounds, side.what)
			r, err := side.run()
			if err != nil {
				return err
			}
			progressf("bench:   %.0f req/s, p50 %v; %v", r.rate, round(r.p50), r.cpu)
			*side.into = append(*side.into, r)
		}
	}
	return nil
}

func benchRates(rs []benchRun) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = r.rate
	}
	return out
}

// spanSink is an OTLP http endpoint that takes every export and keeps
// nothing but counts.
type spanSink struct {
	addr         string
	srv          *http.Server
	posts, bytes atomic.Int64
}

func startSpanSink() (*spanSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &spanSink{addr: ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.posts.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *spanSink) close() { s.srv.Close() }
