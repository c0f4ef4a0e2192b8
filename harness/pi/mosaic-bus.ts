// The pi extension of mosaic-bus: a placeholder until the real one is merged (harness/pi/mosaic-bus.ts).
