"""The directors' live stats of a race: places, confirmations per minute, holds, code uses."""
