package server

import (
	"mime"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/helmet"
)

// helmetHeaders are Fiber's helmet defaults made stricter for an API: no
// framing at all, and a policy for the answers that are not pages (the
// pages and charts set their own, which replaces it).
var helmetHeaders = helmet.New(helmet.Config{
	XFrameOptions:         "DENY",
	ContentSecurityPolicy: "default-src 'none'; frame-ancestors 'none'",
	HSTSMaxAge:            31536000, // sent only over https (behind a trusted proxy that says so)
})

// securityHeaders puts the security headers on every response, and keeps
// the API's answers (tokens, orders, live stock) out of every cache; the
// pages set their own Cache-Control, which replaces this one.
func securityHeaders(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	return helmetHeaders(c)
}

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
