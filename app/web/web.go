// Package web holds the pages the server serves — the storefront at /,
// the operations dashboard at /dashboard —
// embedded in the binary: no CDN and no build step, so `make run` shows
// them with nothing to install and the network off.
package web

import "embed"

// Assets are the pages' files: index.html at the root, the rest under
// assets/.
//
//go:embed index.html dashboard.html pay.html assets
var Assets embed.FS

// ContentSecurityPolicy allows the pages nothing but their own origin:
// scripts and styles from the app's files (no inline script, no eval),
// requests to the app's own API.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
