package auth

import "strings"

// maxUserAgentBytes bounds the part of a User-Agent header that
// DescribeBrowser reads; real ones are a few hundred bytes.
const maxUserAgentBytes = 512

// UnknownBrowser is DescribeBrowser's answer for a header it cannot read.
const UnknownBrowser = "unknown browser"

// DescribeBrowser names the browser family and operating system a
// User-Agent header claims, for a person to recognise their session by:
// "Firefox on Linux", "Chrome on Android", "Safari on iPhone", or
// UnknownBrowser. The answer is always one of a fixed set of words, never
// a piece of the header, so it carries nothing the client chose; only the
// first maxUserAgentBytes are read. It is a description, not a proof:
// the header is whatever the client sends.
func DescribeBrowser(ua string) string {
	if len(ua) > maxUserAgentBytes {
		ua = ua[:maxUserAgentBytes]
	}
	browser, os := browserFamily(ua), osFamily(ua)
	switch {
	case browser == "" && os == "":
		return UnknownBrowser
	case browser == "":
		return "a browser on " + os
	case os == "":
		return browser
	}
	return browser + " on " + os
}

// browserFamily is the browser a header names, "" if none. Order matters:
// most headers claim several (Edge's names Chrome and Safari too).
func browserFamily(ua string) string {
	has := func(s string) bool { return strings.Contains(ua, s) }
	switch {
	case has("Edg/"), has("EdgA/"), has("EdgiOS/"):
		return "Edge"
	case has("OPR/"), has("OPiOS/"), has("Opera"):
		return "Opera"
	case has("SamsungBrowser/"):
		return "Samsung Internet"
	case has("Firefox/"), has("FxiOS/"):
		return "Firefox"
	case has("Chrome/"), has("CriOS/"), has("Chromium/"):
		return "Chrome"
	case has("Safari/") && (has("Version/") || has("Mobile/")):
		return "Safari"
	case has("curl/"):
		return "curl"
	}
	return ""
}

// osFamily is the operating system a header names, "" if none.
func osFamily(ua string) string {
	has := func(s string) bool { return strings.Contains(ua, s) }
	switch {
	case has("iPhone"):
		return "iPhone"
	case has("iPad"):
		return "iPad"
	case has("Android"):
		return "Android"
	case has("CrOS"):
		return "ChromeOS"
	case has("Windows"):
		return "Windows"
	case has("Macintosh"), has("Mac OS X"):
		return "macOS"
	case has("Linux"), has("X11"):
		return "Linux"
	}
	return ""
}
