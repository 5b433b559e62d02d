package web

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"time"
)

// openAPIDocument describes every JSON route under /api/ in OpenAPI 3.1.
// It is kept by hand beside the routes; openapi_test.go checks it against
// routeTable both ways, validates it, and validates real answers against
// it.
//
//go:embed openapi.json
var openAPIDocument []byte

// handleOpenAPI serves the document. It changes only with the binary, so
// caches may keep it for an hour and then revalidate it by its ETag.
func handleOpenAPI() http.Handler {
	sum := sha256.Sum256(openAPIDocument)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "public, max-age=3600")
		h.Set("ETag", etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(openAPIDocument))
	})
}
