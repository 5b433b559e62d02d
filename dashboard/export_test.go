package dashboard

import "time"

// SetSearchTimeout sets how long r's searches may take.
func SetSearchTimeout(r *Reader, d time.Duration) { r.searchTimeout = d }
