//go:build js && wasm

// Command wasm is package client for web pages (GOOS=js GOARCH=wasm): a data owner's browser privatises
// their rows with a published mechanism file, and only the releases leave the page. It defines one
// JavaScript function,
//
//	ldpsqlPrivatise(mechanismFileText, rowsJSON, randomiser, eps) → JSON text
//
// whose result is {"releases": [[...], ...]} or {"error": "..."}. The noise comes from the browser's
// crypto.getRandomValues (Go's crypto/rand on js/wasm). Build it with scripts/build-wasm.sh; see
// examples/browser.
package main

import (
	"encoding/json"
	"fmt"
	"syscall/js"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/mechanisms"
)

func privatise(_ js.Value, args []js.Value) (result any) {
	reply := func(v map[string]any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	defer func() {
		if r := recover(); r != nil {
			result = reply(map[string]any{"error": fmt.Sprint(r)})
		}
	}()
	if len(args) != 4 {
		return reply(map[string]any{"error": "ldpsqlPrivatise(mechanismFileText, rowsJSON, randomiser, eps) takes 4 arguments"})
	}
	m, err := client.Load([]byte(args[0].String()))
	if err != nil {
		return reply(map[string]any{"error": err.Error()})
	}
	var rows [][]float32
	if err := json.Unmarshal([]byte(args[1].String()), &rows); err != nil {
		return reply(map[string]any{"error": "rows: " + err.Error()})
	}
	rel, err := m.Privatise(rows, args[2].String(), args[3].Float(), mechanisms.NewCryptoSource())
	if err != nil {
		return reply(map[string]any{"error": err.Error()})
	}
	return reply(map[string]any{"mechanism": m.File.Name, "releases": rel})
}

func main() {
	js.Global().Set("ldpsqlPrivatise", js.FuncOf(privatise))
	select {}
}
