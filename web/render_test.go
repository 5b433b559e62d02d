package web

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a-h/templ"
)

// Pages rendered at once, through the buffers render reuses, each get
// their own page whole: no buffer is shared while it is written, and a
// page larger than the pool keeps is still written whole.
func TestRenderReusesBuffersSafely(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	page := func(i int) string {
		size := 100 + i*37
		if i%10 == 0 {
			size = maxPooledPage + 1
		}
		return fmt.Sprintf("<p>%d</p>", i) + strings.Repeat(string(rune('a'+i%26)), size)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := range 50 {
				i := g*50 + k
				want := page(i)
				c := templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
					_, err := io.WriteString(w, want)
					return err
				})
				rec := httptest.NewRecorder()
				s.render(rec, httptest.NewRequest("GET", "/", nil), 429, c)
				if rec.Code != 429 || rec.Body.String() != want || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
					t.Errorf("page %d: status %d, %d bytes, type %q; want 429 and its own %d bytes",
						i, rec.Code, rec.Body.Len(), rec.Header().Get("Content-Type"), len(want))
					return
				}
			}
		})
	}
	wg.Wait()
}
