package web

import (
	"net"
	"net/http"
	"os"
	"strings"
)

// CheckHost wraps h so that a request whose Host header names neither the
// address listened on, localhost, this host's name nor an IP literal is
// refused with 421 Misdirected Request. A DNS rebinding attack reaches a
// local server through a web page under a name the attacker controls; the
// browser then sends that name as Host, which is refused here. IP literals
// cannot be rebound, so a scraper that uses the host's address still works.
func CheckHost(listen string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !AllowedHost(listen, r.Host) {
			http.Error(w, "cacheheat: this server answers to its own address, localhost or an IP literal only", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// AllowedHost says whether a request's Host header may reach a server
// listening on listen (see CheckHost).
func AllowedHost(listen, host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	if name == "" {
		return false
	}
	if net.ParseIP(name) != nil || strings.EqualFold(name, "localhost") {
		return true
	}
	if lh, _, err := net.SplitHostPort(listen); err == nil && lh != "" && strings.EqualFold(lh, name) {
		return true
	}
	if hn, err := os.Hostname(); err == nil && strings.EqualFold(hn, name) {
		return true
	}
	return false
}
