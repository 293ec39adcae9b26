package web

import (
	"net"
	"net/http"
	"os"
	"strings"
)

// CheckHost wraps h so that a request whose Host header does not name
// this server is refused with 421 Misdirected Request. That defeats DNS
// rebinding: a web page on attacker.example that makes its name resolve to
// 127.0.0.1 can reach a local server, but its requests still say
// "Host: attacker.example". Allowed are localhost, loopback literals, the
// host of the address the server was asked to listen on (addr, as given)
// and the address it listens on (ln); on an unspecified address (0.0.0.0,
// [::]) also any IP literal and this host's name, as a DNS rebinding
// attack needs a domain name.
func CheckHost(h http.Handler, addr string, ln net.Addr) http.Handler {
	allowed := map[string]bool{"localhost": true}
	anyIP := false
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		allowed[normalHost(host)] = true
	}
	if ta, ok := ln.(*net.TCPAddr); ok {
		allowed[normalHost(ta.IP.String())] = true
		if ta.IP.IsUnspecified() {
			anyIP = true
			if name, err := os.Hostname(); err == nil {
				allowed[normalHost(name)] = true
			}
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, allowed, anyIP) {
			setSecurityHeaders(w.Header())
			http.Error(w, "misdirected request: the Host header does not name this server (use http://localhost:PORT/ or the address it listens on)", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func hostAllowed(hostport string, allowed map[string]bool, anyIP bool) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = normalHost(host)
	if host == "" {
		return false
	}
	if allowed[host] {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || anyIP)
}

// normalHost lowercases a host name, drops a trailing dot and the brackets
// of an IPv6 literal.
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}
