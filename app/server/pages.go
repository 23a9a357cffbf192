package server

import (
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/app/web"
)

// The pages: the storefront at /, its files under /assets/, all embedded
// in the binary (app/web).

var pageTypes = map[string]string{
	".html": fiber.MIMETextHTMLCharsetUTF8,
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

// pageFile answers one embedded file with the pages' security headers.
func pageFile(name string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		return sendPageFile(c, name)
	}
}

func sendPageFile(c *fiber.Ctx, name string) error {
	body, err := fs.ReadFile(web.Assets, name)
	ctype, known := pageTypes[path.Ext(name)]
	if err != nil || !known {
		return fiber.ErrNotFound
	}
	c.Set(fiber.HeaderContentType, ctype)
	c.Set(fiber.HeaderContentSecurityPolicy, web.ContentSecurityPolicy)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	// Small, and part of the binary: revalidated rather than cached for
	// long, so a new release shows at once.
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.Send(body)
}

// asset answers /assets/<file>; names with a slash or dots leading
// elsewhere are not found.
func asset(c *fiber.Ctx) error {
	name := c.Params("file")
	if name == "" || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		return fiber.ErrNotFound
	}
	return sendPageFile(c, "assets/"+name)
}

func (a *shopperRoutes) listVouchers(c *fiber.Ctx) error {
	vouchers, err := a.catalog.Current(c.UserContext())
	if err != nil {
		return err
	}
	out := make([]voucherJSON, len(vouchers))
	for i, v := range vouchers {
		out[i] = toVoucherJSON(v)
	}
	// serverTime lets a page count down on the shop's clock, not the
	// device's (a phone minutes off would open the sale early or late).
	return c.JSON(fiber.Map{"vouchers": out, "serverTime": time.Now().UTC()})
}
