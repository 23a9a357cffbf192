// Command seckill serves the flash-sale API. With SECKILL_REDIS_URL and
// SECKILL_MYSQL_DSN unset it runs on embedded stand-ins; see README.md.
//
//	seckill           serve (the default)
//	seckill compare   the comparison lab: the same sale on every backend
//	seckill bench     the load run that prints each ratio against its baseline
package main

import (
	"os"

	"github.com/seckill-lab/seckill/app/lab"
	"github.com/seckill-lab/seckill/app/server"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "compare":
			os.Exit(lab.RunCompare(os.Args[2:]))
		case "bench":
			os.Exit(lab.RunBench(os.Args[2:]))
		case lab.BareHandlerCommand:
			os.Exit(lab.RunBareHandler())
		case lab.NaiveHandlerCommand:
			os.Exit(lab.RunNaiveHandler())
		}
	}
	os.Exit(server.Main())
}
