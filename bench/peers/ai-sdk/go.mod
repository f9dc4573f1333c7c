// This go.mod holds no Go code. It makes bench/peers/ai-sdk a module of its
// own so that `go build/vet/test ./...` in the library module never walks
// into node_modules (npm packages may ship .go files, and Go does not skip
// directories named node_modules).
module github.com/polyweave/polyweave-go/bench/peers/ai-sdk

go 1.26
