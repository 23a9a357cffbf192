package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// deadLettersUsage is `seckill deadletters -h`.
const deadLettersUsage = `Usage: seckill deadletters <list|show|redrive|discard> [flags]

Works a running instance's dead letters through its admin API, with the
token in SECKILL_ADMIN_TOKEN:

  list     [filter] [-limit N] [-all] [-resolved] [-json]   the open letters (every page with -all)
  show     ID                                                one letter, with its body as delivered
  redrive  [filter] [-ids 1,2] [-dry-run]                    persist their orders again
  discard  [filter] [-ids 1,2] [-note TEXT] [-everything] [-dry-run]
                                                             resolve without persisting: units back on sale

filter: -reason KIND -voucher ID -since RFC3339 -until RFC3339
-addr: the instance, as a URL (http://10.0.0.5:8080) or host:port; default SECKILL_ADDR, else :8080.
`

// deadLetters is `seckill deadletters`.
func deadLetters(args []string) int {
	return runDeadLetters(args, os.Getenv, os.Stdout, os.Stderr)
}

// deadLetterClient calls one instance's admin API: its dead letters, and
// the steering of its sales (seckill sale), as operator when named.
type deadLetterClient struct {
	base, token, operator string
	http                  *http.Client
}

// do sends body (nil: none) and decodes the 200 answer into out.
func (c deadLetterClient) do(method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	if c.operator != "" {
		req.Header.Set("X-Seckill-Operator", c.operator)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	return json.Unmarshal(raw, out)
}

// baseURL reads an instance's address: a URL, or host:port (":8080" when
// empty; a missing or unspecified host is this machine).
func baseURL(addr string) (string, error) {
	if addr == "" {
		addr = ":8080"
	}
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("-addr %q: want a URL such as http://127.0.0.1:8080, or host:port", addr)
		}
		return strings.TrimSuffix(u.String(), "/"), nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("-addr %q: want a URL such as http://127.0.0.1:8080, or host:port", addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// deadLetterFlags are every subcommand's flags (each uses its own).
type deadLetterFlags struct {
	addr, reason, voucher, since, until, ids, note string
	limit                                          int
	all, resolved, asJSON, dryRun, everything      bool
}

func parseDeadLetterFlags(cmd string, args []string, env func(string) string, stderr io.Writer) (*deadLetterFlags, []string, error) {
	f := &deadLetterFlags{}
	fs := flag.NewFlagSet("seckill deadletters "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.addr, "addr", env("SECKILL_ADDR"), "the instance: a URL or host:port")
	fs.StringVar(&f.reason, "reason", "", "only this kind: poison, max_deliveries, stock_anomaly, id_collision, buyer_holds_another, unauthenticated")
	fs.StringVar(&f.voucher, "voucher", "", "only this voucher's")
	fs.StringVar(&f.since, "since", "", "dead-lettered at or after (RFC 3339)")
	fs.StringVar(&f.until, "until", "", "dead-lettered before (RFC 3339)")
	fs.StringVar(&f.ids, "ids", "", "these letters only (comma-separated ids)")
	fs.StringVar(&f.note, "note", "", "discard: a note kept with the resolution")
	fs.IntVar(&f.limit, "limit", 100, "list: letters per page")
	fs.BoolVar(&f.all, "all", false, "list: every page")
	fs.BoolVar(&f.resolved, "resolved", false, "list: the resolved letters instead")
	fs.BoolVar(&f.asJSON, "json", false, "list: the API's JSON, one page per line")
	fs.BoolVar(&f.dryRun, "dry-run", false, "redrive, discard: only count what matches")
	fs.BoolVar(&f.everything, "everything", false, "discard: every open letter (a discard needs a filter, ids or this)")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	return f, fs.Args(), nil
}

// runDeadLetters runs `seckill deadletters args`.
func runDeadLetters(args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, deadLettersUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	// What a letter says is anyone's text: it reaches the terminal escaped.
	stdout, stderr = terminalSafe{stdout}, terminalSafe{stderr}
	cmd := args[0]
	f, rest, err := parseDeadLetterFlags(cmd, args[1:], env, stderr)
	if err != nil {
		return 2
	}
	base, err := baseURL(f.addr)
	if err != nil {
		fmt.Fprintln(stderr, "seckill deadletters:", err)
		return 2
	}
	token := env("SECKILL_ADMIN_TOKEN")
	if token == "" {
		fmt.Fprintln(stderr, "seckill deadletters: set SECKILL_ADMIN_TOKEN to the instance's admin token")
		return 2
	}
	c := deadLetterClient{base: base, token: token, http: &http.Client{Timeout: 10 * time.Minute}}
	switch cmd {
	case "list":
		err = listLetters(c, f, stdout)
	case "show":
		err = showLetter(c, rest, stdout)
		rest = nil
	case "redrive", "discard":
		err = actOnLetters(c, cmd, f, stdout)
	default:
		fmt.Fprintf(stderr, "seckill deadletters: unknown command %q\n\n%s", cmd, deadLettersUsage)
		return 2
	}
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected arguments %q", rest)
	}
	if err != nil {
		fmt.Fprintln(stderr, "seckill deadletters "+cmd+":", err)
		return 1
	}
	return 0
}

// filterQuery is f's filter as list's query.
func (f *deadLetterFlags) filterQuery() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"reason": f.reason, "voucher": f.voucher, "since": f.since, "until": f.until} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// listLetters prints the letters, one page or every page.
func listLetters(c deadLetterClient, f *deadLetterFlags, stdout io.Writer) error {
	q := f.filterQuery()
	q.Set("limit", fmt.Sprint(f.limit))
	if f.resolved {
		q.Set("state", "resolved")
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	header := "ID\tREASON\tORDER\tUSER\tVOUCHER\tDELIVERIES\tREDRIVEN\tFIRST FAILED\tBACKEND\tERROR"
	if f.resolved {
		header += "\tRESOLVED\tAT\tNOTE" // how, when and why: the table hid them (only -json had them)
	}
	if !f.asJSON {
		fmt.Fprintln(tw, header)
	}
	var open int64
	for cursor := ""; ; {
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Items      []map[string]any `json:"items"`
			NextCursor *string          `json:"nextCursor"`
			Open       int64            `json:"open"`
		}
		if err := c.do("GET", "/api/admin/deadletters?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		open = page.Open
		if f.asJSON {
			raw, _ := json.Marshal(page)
			fmt.Fprintln(stdout, string(raw))
		}
		for _, it := range page.Items {
			if !f.asJSON {
				cells := []any{it["id"], it["reason"], orDash(it["orderId"]), orDash(it["userId"]), orDash(it["voucherId"]),
					it["deliveries"], it["redriven"], it["firstFailedAt"], it["backend"], it["error"]}
				if f.resolved {
					cells = append(cells, it["resolved"], it["resolvedAt"], orDash(it["note"]))
				}
				row := make([]string, len(cells))
				for i, c := range cells {
					row[i] = fmt.Sprint(printable(c))
				}
				fmt.Fprintln(tw, strings.Join(row, "\t"))
			}
		}
		if page.NextCursor == nil || !f.all {
			break
		}
		cursor = *page.NextCursor
	}
	if !f.asJSON {
		tw.Flush()
		fmt.Fprintf(stdout, "%d open\n", open)
	}
	return nil
}

func orDash(v any) any {
	if v == nil {
		return "-"
	}
	return v
}

// showLetter prints one letter as the API gives it.
func showLetter(c deadLetterClient, args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("want one letter's id: seckill deadletters show ID")
	}
	var letter map[string]any
	if err := c.do("GET", "/api/admin/deadletters/"+url.PathEscape(args[0]), nil, &letter); err != nil {
		return err
	}
	raw, _ := json.MarshalIndent(letter, "", "  ")
	fmt.Fprintln(stdout, string(raw))
	return nil
}

// actOnLetters re-drives or discards what f matches.
func actOnLetters(c deadLetterClient, cmd string, f *deadLetterFlags, stdout io.Writer) error {
	body := map[string]any{"dryRun": f.dryRun}
	for k, v := range f.filterQuery() {
		body[k] = v[0]
	}
	if f.ids != "" {
		body["ids"] = strings.Split(f.ids, ",")
	}
	if cmd == "discard" {
		body["note"], body["all"] = f.note, f.everything
	}
	// A call goes on for a few seconds and says if there is more: the
	// totals are the calls'.
	total := map[string]float64{}
	for {
		var out struct {
			Matched, Redriven, Skipped, Refused, Discarded float64
			More                                           bool
		}
		if err := c.do("POST", "/api/admin/deadletters/"+cmd, body, &out); err != nil {
			return err
		}
		total["matched"] += out.Matched
		total["redriven"] += out.Redriven
		total["skipped"] += out.Skipped
		total["refused"] += out.Refused
		total["discarded"] += out.Discarded
		if !out.More {
			break
		}
	}
	switch {
	case f.dryRun:
		fmt.Fprintf(stdout, "%v match (dry run: nothing done)\n", total["matched"])
	case cmd == "redrive":
		// Refused and not tried are told apart: an operator reading
		// "skipped" for a re-drive the database refused looked no further.
		fmt.Fprintf(stdout, "%v re-driven, %v refused (tried: each letter stays open and says why), %v not tried (no order of ours, or past the re-drive limit)\n",
			total["redriven"], total["refused"], total["skipped"]-total["refused"])
	default:
		fmt.Fprintf(stdout, "%v discarded\n", total["discarded"])
	}
	return nil
}
