package mcp

import "net/url"

// WithHooks makes o's import call connected in each connection attempt
// that has its session and has not yet made it known to the teardown,
// and teardownWaits when the teardown begins to wait for the attempts in
// flight; either may be nil.
func WithHooks(o *ImportOptions, connected, teardownWaits func()) {
	o.hooks = &hooks{connected: connected, teardownWaits: teardownWaits}
}

// WithProxy makes o's import send its requests through proxy, as
// HTTPS_PROXY would (which net/http reads once per process).
func WithProxy(o *ImportOptions, proxy *url.URL) {
	if o.hooks == nil {
		o.hooks = &hooks{}
	}
	o.hooks.proxy = proxy
}
