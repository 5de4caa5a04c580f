{ Seed 000, comment 4: one thread allocates COUNT small objects and assigns
  strings and numbers to their fields, then frees them all.
    objects COUNT }
program objects;
{$mode objfpc}{$H+}
uses {$ifdef USE_SPRY}spry,{$endif} {$ifdef USE_CMEM}cmem,{$endif}
  cthreads, Classes, SysUtils, Linux, UnixType;
{$I common.inc}
type
  TPerson = class
    FirstName, LastName, City: string;
    Age: Integer;
    Salary: Double;
    Id: Int64;
  end;
var
  list: array of TPerson;
  p: TPerson;
  i, count: Int64;
  t0, t_alloc, t_free: Double;
begin
  count := ArgInt(1, 5000000);
  SetLength(list, count);
  t0 := Now_s;
  for i := 0 to count - 1 do
    begin
      p := TPerson.Create;
      p.FirstName := 'First' + IntToStr(i);
      p.LastName := 'Last name number ' + IntToStr(i * 7);
      if i mod 3 = 0 then p.City := 'City of ' + p.FirstName;
      p.Age := i mod 97;
      p.Salary := i * 1.5;
      p.Id := i;
      list[i] := p;
    end;
  t_alloc := Now_s - t0;
  t0 := Now_s;
  for i := 0 to count - 1 do
    list[i].Free;
  t_free := Now_s - t0;
  Report('pascal_objects', 'total_s=' + Secs(t_alloc + t_free) + ' alloc_s=' + Secs(t_alloc) +
    ' free_s=' + Secs(t_free) + ' count=' + IntToStr(count));
end.
