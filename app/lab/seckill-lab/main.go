// Command seckill-lab runs the labs: the comparison of the backends, the
// lifecycle's races, and the bench. It is a program of its own, so that
// the server's binary links none of their tools (Porcupine, kfake, the
// fault proxies, the Redis topologies); it starts its server processes
// as itself (`seckill-lab serve`, the server's own Main).
//
//	seckill-lab compare    the same sale on every backend, measured
//	seckill-lab lifecycle  expiry, resale and its races (real servers)
//	seckill-lab bench      each ratio against its baseline (real servers)
//	seckill-lab opening    the opening, open-loop, past capacity
package main

import (
	"os"

	"github.com/seckill-lab/seckill/app/internal/cmdline"
	"github.com/seckill-lab/seckill/app/lab"
	"github.com/seckill-lab/seckill/app/server"
)

func main() {
	os.Exit(program.Run(os.Args[1:], os.Stdout, os.Stderr))
}

var program = cmdline.Program{
	Name:           "seckill-lab",
	RequireCommand: true, // its server processes are started with `serve`, never with nothing
	Intro:          "On the embedded stand-ins a lab measures miniredis and SQLite, not the backends: SECKILL_REDIS_URL and SECKILL_MYSQL_DSN point it at real servers.",
	Commands: []cmdline.Command{
		{Name: "compare", Summary: "the comparison lab: the same sale on every backend, measured (seckill-lab compare -h)", Run: lab.RunCompare},
		{Name: "lifecycle", Summary: "the lifecycle lab: expiry, resale and the races after the reservation, real servers only (seckill-lab lifecycle -h)", Run: lab.RunLifecycle},
		{Name: "bench", Summary: "the load run that prints each ratio against its baseline, real servers only (seckill-lab bench -h)", Run: lab.RunBench},
		{Name: "opening", Summary: "a sale's opening as it happens: open-loop arrivals at the begin time, stepping past the capacity measured in the same run (seckill-lab opening -h)", Run: lab.RunOpening},
		// The labs' own processes: the server as they run it, and the
		// bench's baselines.
		{Name: lab.ServeCommand, Run: func([]string) int { return server.Main() }},
		{Name: lab.BareHandlerCommand, Run: func([]string) int { return lab.RunBareHandler() }},
		{Name: lab.NaiveHandlerCommand, Run: func([]string) int { return lab.RunNaiveHandler() }},
	},
}
