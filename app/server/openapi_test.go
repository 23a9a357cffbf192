package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/docs"
)

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("docs/openapi.yaml is not valid OpenAPI 3: %v", err)
	}
	return doc
}

var fiberParam = regexp.MustCompile(`:(\w+)`)

// TestOpenAPIMatchesTheServer: every route of the server is documented and
// every documented operation is a route; the documented error codes are
// exactly those the server can send.
func TestOpenAPIMatchesTheServer(t *testing.T) {
	doc := loadOpenAPI(t)
	h := startServer(t, "embedded", nil)

	var served []string
	for _, r := range h.srv.http.GetRoutes(true) {
		if r.Method == http.MethodHead || r.Method == "USE" {
			continue
		}
		served = append(served, r.Method+" "+fiberParam.ReplaceAllString(r.Path, "{$1}"))
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	if !slices.Equal(served, documented) {
		t.Fatalf("routes differ:\nserved     %v\ndocumented %v", served, documented)
	}

	var enum []string
	for _, v := range doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value.Enum {
		enum = append(enum, v.(string))
	}
	codes := errorCodes()
	sort.Strings(enum)
	sort.Strings(codes)
	if !slices.Equal(enum, codes) {
		t.Fatalf("error codes differ:\nserver     %v\ndocumented %v", codes, enum)
	}
	// Each documented error status of each operation is one that some
	// error code maps to.
	statuses := map[int]bool{}
	for _, c := range core.Codes {
		statuses[statusOf(c)] = true
	}
	statuses[http.StatusUnsupportedMediaType] = true // requireJSON's own answer
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				n, err := strconv.Atoi(status)
				if err != nil || (n >= 400 && !statuses[n]) {
					t.Errorf("%s %s documents status %s, which no error code maps to", method, path, status)
				}
			}
		}
	}
}

func TestOpenAPIIsServed(t *testing.T) {
	h := startServer(t, "embedded", nil)
	resp, err := h.client.Get(h.base + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != string(docs.OpenAPI) || !strings.Contains(resp.Header.Get("Content-Type"), "yaml") {
		t.Fatalf("GET /openapi.yaml: %d %q, want the document", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestEveryCodeHasAClientStatus: only internal is a 500; everything else a
// client can be told about has a 4xx or a 503.
func TestEveryCodeHasAClientStatus(t *testing.T) {
	for _, c := range core.Codes {
		s := statusOf(c)
		if (c == core.CodeInternal) != (s == 500) || s < 400 {
			t.Errorf("code %s maps to %d", c, s)
		}
	}
}

// TestRealCallsValidateAgainstTheDocument: a shopper's real calls — the
// seckill, the order of the voucher, the persisted order by its id — and
// their answers pass an OpenAPI validator (kin-openapi's, as a client
// generator or a validating proxy would read the document). Real order
// ids are above 2^53: a path parameter declared as an integer is what a
// validator built on JavaScript numbers refused.
func TestRealCallsValidateAgainstTheDocument(t *testing.T) {
	doc := loadOpenAPI(t)
	h := startServer(t, "embedded", nil)
	doc.Servers = openapi3.Servers{{URL: h.base}} // the document names the default address
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	voucher := h.openVoucher(5)
	shopper := h.shopper(42)
	call := func(method, path string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, h.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+shopper)
		if strings.HasPrefix(path, "/api/dashboard") { // the operator's figures
			req.Header.Set("Authorization", "Bearer "+h.cfg.AdminToken)
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s %s: no documented route: %v", method, path, err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Fatalf("%s %s: the request does not validate: %v", method, path, err)
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
			Options: &openapi3filter.Options{IncludeResponseStatus: true}}
		out.SetBodyBytes(body)
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Fatalf("%s %s: the answer %d %s does not validate: %v", method, path, resp.StatusCode, body, err)
		}
		var m map[string]any
		json.Unmarshal(body, &m)
		return m
	}
	// What a JavaScript validator needs: every order id the document
	// declares, in a path or a body, is a string of digits.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, p := range op.Parameters {
				if sc := p.Value.Schema.Value; p.Value.Name == "orderId" && (!sc.Type.Is("string") || sc.Pattern == "") {
					t.Errorf("%s %s: path parameter orderId is %v, want a string with a digits pattern", method, path, sc.Type)
				}
			}
		}
	}
	bought := call("POST", "/api/vouchers/"+idString(voucher)+"/seckill")
	orderID, _ := bought["orderId"].(string)
	if n, err := strconv.ParseInt(orderID, 10, 64); err != nil || n <= 1<<53 {
		t.Fatalf("order id %q: want a 64-bit id above 2^53, as real ids are", orderID)
	}
	h.waitForRows(voucher, 1, 10*time.Second)
	call("GET", "/api/vouchers/"+idString(voucher)+"/order")
	if got := call("GET", "/api/orders/"+orderID); got["orderId"] != orderID {
		t.Fatalf("the order by its id: %v", got)
	}
	// The pages' own calls.
	if got, _ := call("GET", "/api/vouchers")["vouchers"].([]any); len(got) != 1 {
		t.Fatalf("the storefront's listing: %v", got)
	}
	if got := call("GET", "/api/dashboard"); got["backend"] != h.cfg.Queue {
		t.Fatalf("the dashboard's figures with the admin token: %v", got)
	}
	time.Sleep(dashboardInterval)
	call("GET", "/api/dashboard") // the second has rates and latencies
}
