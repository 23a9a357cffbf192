// Package docs embeds the API description served at /openapi.yaml.
package docs

import _ "embed"

// OpenAPI is docs/openapi.yaml, the OpenAPI 3 document of the HTTP API.
//
//go:embed openapi.yaml
var OpenAPI []byte
