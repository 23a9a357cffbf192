package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// saleUsage is `seckill sale -h`.
const saleUsage = `Usage: seckill sale <pause|resume|end|stock|kill|revive|consumers|actions> [ID] [flags]

Steers a running instance's sales through its admin API, with the token in
SECKILL_ADMIN_TOKEN; every action holds on every instance once answered,
and is recorded with -operator (default $USER) and the token's fingerprint:

  pause   ID     no reservation of the voucher succeeds from the answer on
  resume  ID     lift the pause
  end     ID     end the sale now
  stock   ID -delta N   add (or, negative, take) units while it sells
  kill           the kill switch: every voucher not ended paused at once
  revive         turn the kill switch off (its own pauses only)
  consumers pause|resume   every instance's consumers stop taking orders
                 from the queue (reservations go on, queued) or start again
  consumers rate N         persist at most N orders a second in all (0: no cap)
  consumers      the consumers' setting
  actions [-voucher ID] [-limit N]   the record, newest first

-note TEXT: why, kept in the record.
-addr: the instance, as a URL (http://10.0.0.5:8080) or host:port; default SECKILL_ADDR, else :8080.
`

// sale is `seckill sale`.
func sale(args []string) int {
	return runSale(args, os.Getenv, os.Stdout, os.Stderr)
}

// runSale runs `seckill sale args`.
func runSale(args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, saleUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	stdout, stderr = terminalSafe{stdout}, terminalSafe{stderr}
	cmd := args[0]
	fs := flag.NewFlagSet("seckill sale "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", env("SECKILL_ADDR"), "the instance: a URL or host:port")
	note := fs.String("note", "", "why, kept in the record")
	operator := fs.String("operator", env("USER"), "who acts, as recorded")
	voucher := fs.Int64("voucher", 0, "actions: only this voucher's")
	limit := fs.Int("limit", 20, "actions: how many")
	delta := fs.Int64("delta", 0, "stock: the units to add (negative: to take)")
	rest, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return 2
	}
	base, err := baseURL(*addr)
	if err != nil {
		fmt.Fprintln(stderr, "seckill sale:", err)
		return 2
	}
	token := env("SECKILL_ADMIN_TOKEN")
	if token == "" {
		fmt.Fprintln(stderr, "seckill sale: set SECKILL_ADMIN_TOKEN to the instance's admin token")
		return 2
	}
	c := deadLetterClient{base: base, token: token, operator: *operator, http: &http.Client{Timeout: time.Minute}}
	var out map[string]any
	body := map[string]string{"note": *note}
	switch {
	case (cmd == "pause" || cmd == "resume" || cmd == "end") && len(rest) == 1:
		if _, perr := strconv.ParseInt(rest[0], 10, 64); perr != nil {
			fmt.Fprintf(stderr, "seckill sale %s: %q is not a voucher id\n", cmd, rest[0])
			return 2
		}
		err = c.do("POST", "/api/admin/vouchers/"+rest[0]+"/"+cmd, body, &out)
	case cmd == "stock" && len(rest) == 1:
		err = c.do("POST", "/api/admin/vouchers/"+rest[0]+"/stock", map[string]any{"delta": *delta, "note": *note}, &out)
	case cmd == "kill" && len(rest) == 0:
		err = c.do("POST", "/api/admin/sales/pause", body, &out)
	case cmd == "revive" && len(rest) == 0:
		err = c.do("POST", "/api/admin/sales/resume", body, &out)
	case cmd == "consumers":
		return steerConsumers(c, rest, *note, stdout, stderr)
	case cmd == "actions" && len(rest) == 0:
		return listActions(c, *voucher, *limit, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "seckill sale: %q with %q\n\n%s", cmd, rest, saleUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "seckill sale "+cmd+":", err)
		return 1
	}
	fmt.Fprintln(stdout, describeSteered(cmd, out))
	return 0
}

// parseInterleaved parses flags given before or after the arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return rest, nil
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
}

func describeSteered(cmd string, out map[string]any) string {
	switch cmd {
	case "kill":
		return fmt.Sprintf("kill switch on: %v voucher(s) paused", out["paused"])
	case "revive":
		return fmt.Sprintf("kill switch off: %v voucher(s) resumed", out["resumed"])
	case "stock":
		return fmt.Sprintf("voucher %v: %v left", out["voucherId"], out["stock"])
	}
	return fmt.Sprintf("voucher %v: %v (ends %v)", out["voucherId"], out["state"], out["endTime"])
}

func listActions(c deadLetterClient, voucher int64, limit int, stdout, stderr io.Writer) int {
	path := "/api/admin/actions?limit=" + strconv.Itoa(limit)
	if voucher > 0 {
		path += "&voucher=" + strconv.FormatInt(voucher, 10)
	}
	var page struct {
		Items []struct {
			ID        int64  `json:"id"`
			At        string `json:"at"`
			Operator  string `json:"operator"`
			Action    string `json:"action"`
			VoucherID *int64 `json:"voucherId"`
			Note      string `json:"note"`
		} `json:"items"`
	}
	if err := c.do("GET", path, nil, &page); err != nil {
		fmt.Fprintln(stderr, "seckill sale actions:", err)
		return 1
	}
	for _, a := range page.Items {
		v := "-"
		if a.VoucherID != nil {
			v = strconv.FormatInt(*a.VoucherID, 10)
		}
		fmt.Fprintf(stdout, "%d\t%s\t%s\t%s\tvoucher %s\t%s\n", a.ID, a.At, a.Operator, a.Action, v, a.Note)
	}
	return 0
}

// steerConsumers is `seckill sale consumers [pause|resume|rate N]`.
func steerConsumers(c deadLetterClient, rest []string, note string, stdout, stderr io.Writer) int {
	var out struct {
		Paused    bool  `json:"paused"`
		PerSecond int64 `json:"perSecond"`
		Version   int64 `json:"version"`
	}
	var err error
	switch {
	case len(rest) == 0:
		err = c.do("GET", "/api/admin/consumers", nil, &out)
	case len(rest) == 1 && (rest[0] == "pause" || rest[0] == "resume"):
		err = c.do("POST", "/api/admin/consumers/"+rest[0], map[string]string{"note": note}, &out)
	case len(rest) == 2 && rest[0] == "rate":
		n, perr := strconv.ParseInt(rest[1], 10, 32)
		if perr != nil || n < 0 {
			fmt.Fprintf(stderr, "seckill sale consumers rate: %q is not a rate (orders a second, 0: no cap)\n", rest[1])
			return 2
		}
		err = c.do("PUT", "/api/admin/consumers/rate", map[string]any{"perSecond": n, "note": note}, &out)
	default:
		fmt.Fprintf(stderr, "seckill sale consumers: %q\n\n%s", rest, saleUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "seckill sale consumers:", err)
		return 1
	}
	state, limit := "running", "no cap"
	if out.Paused {
		state = "paused"
	}
	if out.PerSecond > 0 {
		limit = fmt.Sprintf("at most %d orders a second in all", out.PerSecond)
	}
	fmt.Fprintf(stdout, "consumers %s, %s (version %d)\n", state, limit, out.Version)
	return 0
}
