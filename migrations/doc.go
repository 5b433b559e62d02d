// Package migrations holds XCloak's Postgres schema as ordered SQL files and
// applies them.
//
// The files are embedded in the binary, named NNNNN_description.sql, and each
// carries goose "-- +goose Up" and "-- +goose Down" sections. [EnsureDatabase]
// creates the database a URL names when it is missing; [Up] then applies
// every migration not yet applied. Both are safe to call from several
// processes at once, so every instance of the service can run them at start.
package migrations
