package lab

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// cpuShare is the CPU a load run cost each of its processes per request.
// On a machine whose cores are shared by the load generator, the server
// and Redis, throughput is set by these sums: they show where a ratio
// comes from, and they vary far less between runs than req/s does.
type cpuShare struct {
	Server, Redis, Load time.Duration
}

func (c cpuShare) String() string {
	return fmt.Sprintf("CPU per request: server %.1f µs, Redis %.1f µs, load generator %.1f µs",
		micros(c.Server), micros(c.Redis), micros(c.Load))
}

// brief is the three figures alone: server / Redis / load generator.
func (c cpuShare) brief() string {
	return fmt.Sprintf("%.1f / %.1f / %.1f µs", micros(c.Server), micros(c.Redis), micros(c.Load))
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// cpuSnapshot is the CPU time used so far by the server process, Redis
// and this process.
type cpuSnapshot struct{ server, redis, self time.Duration }

func takeCPUSnapshot(serverPID int, rdb *redis.Client) cpuSnapshot {
	return cpuSnapshot{server: processCPU(serverPID), redis: redisCPU(rdb), self: selfCPU()}
}

// per divides the CPU used between two snapshots by the requests served.
func (s cpuSnapshot) per(later cpuSnapshot, requests int64) cpuShare {
	if requests <= 0 {
		return cpuShare{}
	}
	n := time.Duration(requests)
	return cpuShare{Server: (later.server - s.server) / n, Redis: (later.redis - s.redis) / n, Load: (later.self - s.self) / n}
}

// processCPU reads user+system time from /proc/<pid>/stat (0 where /proc
// is missing).
func processCPU(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces; the fields after it do not.
	_, rest, ok := strings.Cut(string(raw), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ, fixed at 100 on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is the server's own CPU time from INFO cpu.
func redisCPU(rdb *redis.Client) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		for _, field := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, field); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

// medianCPU is each process's median over runs (each taken on its own: a
// run's shares are not ordered together).
func medianCPU(runs []cpuShare) cpuShare {
	var server, redis, load []float64
	for _, r := range runs {
		server, redis, load = append(server, float64(r.Server)), append(redis, float64(r.Redis)), append(load, float64(r.Load))
	}
	return cpuShare{Server: time.Duration(medianOf(server)), Redis: time.Duration(medianOf(redis)), Load: time.Duration(medianOf(load))}
}
