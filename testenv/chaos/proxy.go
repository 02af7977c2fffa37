package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

type proxyMode int

const (
	modeUp proxyMode = iota
	modeReset
	modeBlackhole
	modeRefuse
)

// Proxy is a TCP (layer 4) proxy on 127.0.0.1 in front of one loopback
// address, typically the API server: bytes pass through untouched, so TLS is
// end to end and the server's certificate must be valid for 127.0.0.1 (the
// envtest API server's is). [Proxy.Cut] and [Proxy.Blackhole] partition the
// clients that dial the proxy from the server; [Proxy.Restore] heals the
// partition. It is safe for concurrent use.
type Proxy struct {
	addr   string // 127.0.0.1:port, kept across Refuse and Restore
	target string
	done   chan struct{}
	wg     sync.WaitGroup

	mu       sync.Mutex
	mode     proxyMode
	ln       net.Listener          // nil while refusing
	conns    map[net.Conn]struct{} // both ends of every forwarded connection
	held     map[net.Conn]struct{} // blackholed client connections
	closed   bool
	accepted int
	dropped  int
}

// NewProxy listens on 127.0.0.1 (a free port) and forwards every connection
// to target, a "host:port" whose host is a loopback IP address or
// "localhost": the proxy never forwards off the machine. Call [Proxy.Close].
func NewProxy(target string) (*Proxy, error) {
	if err := checkLoopback(target); err != nil {
		return nil, fmt.Errorf("chaos: proxy target %q: %w", target, err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: proxy: %w", err)
	}
	p := &Proxy{ln: ln, addr: ln.Addr().String(), target: target, done: make(chan struct{}), conns: map[net.Conn]struct{}{}, held: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve(ln)
	return p, nil
}

// ProxyConfig starts a [Proxy] in front of cfg's server and returns it with a
// copy of cfg that connects through it (same credentials, same CA: only the
// port in Host changes). cfg.Host must be a loopback URL.
func ProxyConfig(cfg *rest.Config) (*Proxy, *rest.Config, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		return nil, nil, fmt.Errorf("chaos: proxy: host %q is not a URL", cfg.Host)
	}
	target := u.Host
	if u.Port() == "" {
		port := "443"
		if u.Scheme == "http" {
			port = "80"
		}
		target = net.JoinHostPort(u.Hostname(), port)
	}
	p, err := NewProxy(target)
	if err != nil {
		return nil, nil, err
	}
	out := rest.CopyConfig(cfg)
	u.Host = p.Addr()
	out.Host = u.String()
	return p, out, nil
}

func checkLoopback(hostport string) error {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return err
	}
	if port == "" || port == "0" {
		return errors.New("no port")
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return errors.New("not a loopback address")
	}
	return nil
}

// Addr is the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.addr }

// Cut partitions the network: every open connection through the proxy is
// closed at once (clients see a reset or EOF mid-request, watches end), and
// new connections are accepted and immediately reset, which a client sees as
// a failed dial or handshake, until [Proxy.Restore].
func (p *Proxy) Cut() { p.partition(modeReset) }

// Blackhole partitions the network silently: open connections are closed as
// by [Proxy.Cut], but new connections are accepted and then never answered
// (their bytes are read and dropped), so a client only notices through its
// own timeouts (TLS handshake, request, HTTP/2 ping). [Proxy.Restore] closes
// the held connections so their clients retry.
func (p *Proxy) Blackhole() { p.partition(modeBlackhole) }

// Refuse partitions the network as a server that is down does: open
// connections are closed as by [Proxy.Cut], and the proxy stops listening,
// so new connections are refused (ECONNREFUSED) until [Proxy.Restore]
// listens on the same address again. Clients tell the two apart: client-go's
// reflector resumes a watch from its last resourceVersion after a refused
// connection (backing off), but lists everything again after any other
// failure to open the watch — so only Refuse makes informers resume watches
// from a resourceVersion that may have expired meanwhile.
//
// The port closes before the open connections do: a client that redials the
// instant its connection closes (a reflector whose watch ended) is refused,
// not accepted and reset.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	p.partition(modeRefuse)
}

func (p *Proxy) partition(m proxyMode) {
	p.mu.Lock()
	if p.mode == modeRefuse && m != modeRefuse {
		p.mu.Unlock()
		p.relisten()
		p.mu.Lock()
	}
	p.mode = m
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.dropped += len(conns) / 2
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Restore heals a partition: new connections are forwarded again, and
// blackholed ones are closed. After [Proxy.Refuse] it listens on the same
// address again, retrying for as long as the port is taken (only another
// process binding it meanwhile can take it) until [Proxy.Close].
func (p *Proxy) Restore() {
	p.relisten()
	p.mu.Lock()
	p.mode = modeUp
	held := p.held
	p.held = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range held {
		_ = c.Close()
	}
}

// relisten listens on p.addr again when the proxy is refusing; it retries
// every 50ms while the port is taken, until Close.
func (p *Proxy) relisten() {
	for {
		p.mu.Lock()
		if p.ln != nil || p.closed || p.mode != modeRefuse {
			p.mu.Unlock()
			return
		}
		var lc net.ListenConfig
		ln, err := lc.Listen(context.Background(), "tcp", p.addr)
		if err == nil {
			p.ln = ln
			p.wg.Add(1)
			go p.serve(ln)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stats returns how many connections the proxy accepted, how many forwarded
// connections a partition closed, and how many are open now.
func (p *Proxy) Stats() (accepted, dropped, open int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.dropped, len(p.conns) / 2
}

// Close stops the proxy, closes every connection and waits for its
// goroutines. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	all := make([]net.Conn, 0, len(p.conns)+len(p.held))
	for c := range p.conns {
		all = append(all, c)
	}
	for c := range p.held {
		all = append(all, c)
	}
	p.conns, p.held = map[net.Conn]struct{}{}, map[net.Conn]struct{}{}
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	for _, c := range all {
		_ = c.Close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) serve(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return // Refuse closed it
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Accept errors other than a closed listener are transient
			// (e.g. too many open files); back off briefly.
			select {
			case <-p.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		p.mu.Lock()
		p.accepted++
		mode, closed := p.mode, p.closed
		if mode == modeBlackhole && !closed {
			p.held[c] = struct{}{}
		}
		p.mu.Unlock()
		switch {
		case closed:
			_ = c.Close()
		case mode == modeReset || mode == modeRefuse:
			reset(c)
		case mode == modeBlackhole:
			p.wg.Add(1)
			go p.swallow(c)
		default:
			p.wg.Add(1)
			go p.forward(c)
		}
	}
}

// reset closes c with an RST rather than a FIN, as a refused or broken
// connection looks to the client.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *Proxy) swallow(c net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(io.Discard, c) // until Restore or Close closes it
	p.mu.Lock()
	delete(p.held, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) forward(client net.Conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: 5 * time.Second}
	server, err := d.DialContext(context.Background(), "tcp", p.target)
	if err != nil {
		reset(client)
		return
	}
	p.mu.Lock()
	if p.mode != modeUp || p.closed {
		// Partitioned while dialling.
		p.mu.Unlock()
		reset(client)
		_ = server.Close()
		return
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	p.mu.Unlock()

	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = client.Close()
			_ = server.Close()
			p.mu.Lock()
			delete(p.conns, client)
			delete(p.conns, server)
			p.mu.Unlock()
		})
	}
	var inner sync.WaitGroup
	inner.Add(2)
	go func() {
		defer inner.Done()
		_, _ = io.Copy(server, client)
		closeBoth()
	}()
	go func() {
		defer inner.Done()
		_, _ = io.Copy(client, server)
		closeBoth()
	}()
	inner.Wait()
}
