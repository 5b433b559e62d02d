// Package live shares the reads behind the dashboard's live stream: a Hub
// reads each watched period once per interval, however many streams watch
// it, and hands every stream the newest frame. It knows nothing of HTTP,
// of Server-Sent Events or of what a frame holds beyond its three regions.
package live
