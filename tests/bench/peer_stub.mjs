// Stands in for ../shared/peer/bench.mjs in test_compare.sh: takes the same
// arguments and prints a RESULT line of the same form with fixed figures
// (pp = 100 tok/s, tg = 50 tok/s), so the table's ratios are known.
const a = process.argv.slice(2);
const opt = (name, def) => { const i = a.indexOf(name); return i >= 0 ? a[i + 1] : def; };
const model = a[0].split('/').pop();
console.log(`RESULT model=${model} t=${opt('-t', '1')} pp${opt('-n', '128')}=100.00 tok/s tg${opt('-m', '64')}=50.00 tok/s (median of ${opt('-r', '3')})`);
