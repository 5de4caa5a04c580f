{ The unit's per-call cost: MemSize (the RTL's AnsiString SetLength calls
  it on nearly every append) and GetMem/FreeMem pairs, in ns per call, from
  Pascal through the RTL (System.MemSize -> MemoryManager.MemSize). In the
  spry build the same loops run from C (calls_c.c, linked in) calling
  spry_usable_size / spry_malloc / spry_free directly, alternating with the
  Pascal loops in the same process; medians of ROUNDS.
    calls ROUNDS CALLS }
program calls;
{$mode objfpc}{$H+}
uses {$ifdef USE_SPRY}spry,{$endif} {$ifdef USE_CMEM}cmem,{$endif}
  cthreads, Classes, SysUtils, Linux, UnixType;
{$I common.inc}
{$ifdef USE_SPRY}
{$L calls_c.o}
function calls_c_usable(ptrs: PPointer; n, reps: SizeUInt): SizeUInt; cdecl; external;
procedure calls_c_pairs(size, count: SizeUInt); cdecl; external;
{$endif}

const
  NPtrs = 1024;
  PairSize = 32;
var
  ptrs: array[0..NPtrs - 1] of Pointer;
  sink: SizeUInt = 0;

function PascalUsable(reps: SizeUInt): SizeUInt;
var r, i: SizeUInt; sum: SizeUInt;
begin
  sum := 0;
  for r := 1 to reps do
    for i := 0 to NPtrs - 1 do
      Inc(sum, MemSize(ptrs[i]));
  Result := sum;
end;

procedure PascalPairs(size, count: SizeUInt);
var i: SizeUInt; p: Pointer;
begin
  for i := 1 to count do
    begin
      p := GetMem(size);
      FreeMem(p);
    end;
end;

function Median(var a: array of Double; n: Integer): Double;
var i, j: Integer; t: Double;
begin
  for i := 1 to n - 1 do
    for j := i downto 1 do
      if a[j] < a[j - 1] then begin t := a[j]; a[j] := a[j - 1]; a[j - 1] := t; end;
  Result := a[n div 2];
end;

var
  rounds, ncalls, reps, k, i: Integer;
  ms, pair, cms, cpair: array of Double;
  t0: Double;
  fields: string;
begin
  rounds := ArgInt(1, 7);
  ncalls := ArgInt(2, 20000000);
  reps := ncalls div NPtrs;
  for i := 0 to NPtrs - 1 do
    ptrs[i] := GetMem(8 + (i * 37) mod 1000);
  SetLength(ms, rounds); SetLength(pair, rounds);
  SetLength(cms, rounds); SetLength(cpair, rounds);
  for k := 0 to rounds - 1 do
    begin
      t0 := Now_s; Inc(sink, PascalUsable(reps));
      ms[k] := (Now_s - t0) * 1e9 / (reps * NPtrs);
{$ifdef USE_SPRY}
      t0 := Now_s; Inc(sink, calls_c_usable(@ptrs[0], NPtrs, reps));
      cms[k] := (Now_s - t0) * 1e9 / (reps * NPtrs);
{$endif}
      t0 := Now_s; PascalPairs(PairSize, ncalls);
      pair[k] := (Now_s - t0) * 1e9 / ncalls;
{$ifdef USE_SPRY}
      t0 := Now_s; calls_c_pairs(PairSize, ncalls);
      cpair[k] := (Now_s - t0) * 1e9 / ncalls;
{$endif}
    end;
  for i := 0 to NPtrs - 1 do
    FreeMem(ptrs[i]);
  fields := 'memsize_ns=' + FormatFloat('0.000', Median(ms, rounds)) +
    ' pair_ns=' + FormatFloat('0.000', Median(pair, rounds));
{$ifdef USE_SPRY}
  fields := fields + ' c_usable_ns=' + FormatFloat('0.000', Median(cms, rounds)) +
    ' c_pair_ns=' + FormatFloat('0.000', Median(cpair, rounds));
{$endif}
  if sink = 0 then WriteLn(StdErr, 'no sizes');
  Report('pascal_calls', fields + ' rounds=' + IntToStr(rounds) + ' calls=' + IntToStr(ncalls));
end.
