package server

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

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
