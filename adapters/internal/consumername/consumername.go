// Package consumername names this process's consumers when no stable name
// is configured.
package consumername

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Default is hostname-pid-random: unique per process, so two processes on
// one host (or one pid reused after a restart) never share a consumer
// name, and readable in XINFO and logs.
func Default() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), strconv.FormatInt(time.Now().UnixNano()%1e9, 36))
}

// Of is the name of consumer index of a process named prefix.
func Of(prefix string, index int) string { return prefix + "-" + strconv.Itoa(index) }
