// Package bench holds Polyweave's benchmarks. Every figure is measured
// against its baseline in the same run (sub-benchmarks side by side), so
// that ratios, not absolute times, are what gets compared across machines.
//
//	go test -run '^$' -bench . -benchmem ./bench/
package bench
