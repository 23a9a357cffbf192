package server

import (
	"mime"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/helmet"
)

// securityHeaders puts on every response the headers OWASP's REST
// security cheat sheet asks of an API: no sniffing, no framing, no
// referrer, a policy that allows nothing (the pages and charts set their
// own, which replaces it), and no caching (tokens, orders and live stock
// stay out of every cache; the pages set their own Cache-Control). Five
// short headers: the seckill's refusals are most of a sale, and the full
// helmet set on them cost 3–11% of the sold-out rate under wrk
// (docs/performance.md) for headers that only documents use.
func securityHeaders(c *fiber.Ctx) error {
	h := &c.Response().Header
	for _, kv := range securityHeaderValues {
		h.SetCanonical(kv[0], kv[1])
	}
	return c.Next()
}

// securityHeaderValues are securityHeaders' names, already canonical, and
// values: SetCanonical skips the normalising copy Set makes of each name,
// half the headers' cost (0.44 → 0.25 µs per response, measured with
// fasthttp's ResponseHeader alone).
var securityHeaderValues = [][2][]byte{
	{[]byte(fiber.HeaderXContentTypeOptions), []byte("nosniff")},
	{[]byte(fiber.HeaderXFrameOptions), []byte("DENY")},
	{[]byte(fiber.HeaderReferrerPolicy), []byte("no-referrer")},
	{[]byte(fiber.HeaderContentSecurityPolicy), []byte("default-src 'none'; frame-ancestors 'none'")},
	{[]byte(fiber.HeaderCacheControl), []byte("no-store")},
}

// pageHeaders add, on the pages, their files and the charts, the rest of
// Fiber's helmet set (cross-origin isolation, no DNS prefetch, HSTS over
// https): headers a browser heeds on documents.
var pageHeaders = helmet.New(helmet.Config{
	XFrameOptions: "DENY",
	HSTSMaxAge:    31536000, // sent only over https (behind a trusted proxy that says so)
})

// codeUnsupportedMediaType: a request without the JSON content type an
// endpoint requires.
const codeUnsupportedMediaType = "unsupported_media_type"

// requireJSON refuses a body that does not say it is JSON. The
// unauthenticated endpoints use it: a web page elsewhere can make its
// visitors' browsers POST text/plain (or a form) anywhere without asking
// first, but application/json takes a CORS preflight, which this server
// never grants.
func requireJSON(c *fiber.Ctx) error {
	mt, _, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	if err != nil || !strings.EqualFold(mt, fiber.MIMEApplicationJSON) {
		return writeError(c, fiber.StatusUnsupportedMediaType, codeUnsupportedMediaType, "Content-Type must be application/json")
	}
	return c.Next()
}
