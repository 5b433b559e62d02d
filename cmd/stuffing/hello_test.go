package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestHello(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"stuffing", "hello", "--addr", "127.0.0.1:0"}, pw, io.Discard)
		_ = pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "hello listening on ")
	if !ok {
		t.Fatalf("first line %q, want the address", line)
	}
	resp, err := http.Post(url+loginPath, "application/json", strings.NewReader(`{"email":"a@example.com","password":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "hello\n" {
		t.Errorf("got %d %q, want 200 \"hello\\n\"", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("hello returned %v after the interrupt, want nil", err)
	}
}
